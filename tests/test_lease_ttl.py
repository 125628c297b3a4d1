"""A poll for a lease whose recorded expiry is still ahead is no hang: the TTL frees it, on real
captures (redteam/healthy_lease_retry_ttl_early.py, redteam/lease_expiry_clock_mixup.py): a
LeaseTable records `(owner, time.time() + ttl_s)` and answers `(False, holder, expires_at)`;
compact_table's first attempt took the lease and died (os._exit), its retry polls
`granted, holder, expires_at = ray.get(table.try_acquire.remote(...))` every second. In the healthy
run the 120 s TTL was 81 s ahead when the tool looked; in the twin the table tests the expiry
against `time.monotonic()`, so an expiry 39 s past is never honoured."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.expiry import ANSWER, CLOCK_TEST, _timed_names, _wall_time
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
EARLY = CAPTURES / "healthy_lease_retry_ttl_early"
MIXUP = CAPTURES / "lease_expiry_clock_mixup"


def _answer(folder: Path) -> tuple[str, str, list[str], str]:
    doc = to_json(reanalyse(folder))
    top = doc["root_causes"][0]
    return doc["verdict"], top["pattern"], [str(c.get("name")) for c in top["culprits"]], doc["summary"]


def _poll_frames(doc: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(process, frame) of each sample of the retry's `compact_table` loop frame."""
    return [(p, f) for p in doc["processes"] for t in p["threads"] for f in t["frames"]
            if f["function"] == "compact_table" and p["role"] == "task"]


def _sampled_at(doc: dict[str, Any], pid: int) -> list[float]:
    return next(i["sampled_at"] for i in doc["meta"]["info"] if i["pid"] == pid)


def _set_expiry(ahead_s: float) -> Any:
    """Each sample's `expires_at` put `ahead_s` after that sample's time (negative: in the past)."""
    def edit(doc: dict[str, Any]) -> None:
        for proc, frame in _poll_frames(doc):
            if frame.get("facts"):
                frame["facts"]["expires_at"] = _sampled_at(doc, proc["pid"])[proc["sample"]] + ahead_s
    return edit


def test_a_poll_for_a_lease_whose_expiry_is_ahead_is_not_a_hang() -> None:
    # GIVEN the retry polling a lease its dead first attempt took, its loop holding
    # `expires_at` 81 s after the sample (the poll's log names the dead attempt's owner token)
    verdict, pattern, culprits, summary = _answer(EARLY)
    # THEN not hung: the release is scheduled; the dead attempt is not named the holder that blocks it
    assert verdict == "inconclusive" and pattern == "poll-never-satisfied", (verdict, summary)
    assert not any("attempt 0" in c for c in culprits), culprits
    assert "`expires_at`" in summary and "(in 81 s)" in summary, summary


def test_the_same_poll_with_its_expiry_long_past_is_a_hang_on_the_dead_attempt(tmp_path: Path) -> None:
    # GIVEN the same readings, the lease's expiry 60 s before the sample and the poll still failing
    verdict, pattern, culprits, summary = _answer(capture_variant(tmp_path, EARLY, stacks=_set_expiry(-60.0)))
    # THEN hung: the TTL did not free it; the dead first attempt holds it
    assert (verdict, pattern) == ("hang", "poll-never-satisfied"), summary
    assert culprits == ["compact_table attempt 0"], culprits


def test_an_expiry_just_past_may_still_be_about_to_clear(tmp_path: Path) -> None:
    # GIVEN the expiry 4 s before the sample (a poll round, a clock a little apart)
    verdict, _pattern, _culprits, summary = _answer(capture_variant(tmp_path, EARLY, stacks=_set_expiry(-4.0)))
    # THEN not yet a hang
    assert verdict == "inconclusive" and "(4 s ago)" in summary, summary


def test_an_expiry_that_moves_forward_between_samples_is_renewed_and_frees_nothing(tmp_path: Path) -> None:
    # GIVEN the expiry read in both samples, 6 s later in the second (someone renews the lease)
    def renew(doc: dict[str, Any]) -> None:
        facts = next(f["facts"] for _p, f in _poll_frames(doc) if f.get("facts"))
        for proc, frame in _poll_frames(doc):
            frame["facts"] = {**facts, "expires_at": facts["expires_at"] - 6.0 * (1 - proc["sample"])}
    verdict, pattern, culprits, summary = _answer(capture_variant(tmp_path, EARLY, stacks=renew))
    # THEN hung as without an expiry: a renewed claim is not released by its TTL
    assert (verdict, pattern, culprits) == ("hang", "poll-never-satisfied", ["compact_table attempt 0"]), summary


def test_a_poll_whose_loop_holds_no_expiry_stays_a_hang(tmp_path: Path) -> None:
    # GIVEN the same readings without the `expires_at` local (a lease table that answers only the holder)
    def drop(doc: dict[str, Any]) -> None:
        for _proc, frame in _poll_frames(doc):
            if frame.get("facts"):
                del frame["facts"]["expires_at"]
    verdict, _pattern, culprits, _summary = _answer(capture_variant(tmp_path, EARLY, stacks=drop))
    assert (verdict, culprits) == ("hang", ["compact_table attempt 0"])


def test_an_expiry_past_and_never_honoured_is_a_hang_that_says_so() -> None:
    # GIVEN the twin: the expiry 39 s past at the sample (its table tests it against monotonic time)
    doc = to_json(reanalyse(MIXUP))
    top = doc["root_causes"][0]
    # THEN hung on the dead first attempt, the evidence naming the expiry that does not free it
    assert (doc["verdict"], top["pattern"]) == ("hang", "poll-never-satisfied")
    assert [c["name"] for c in top["culprits"]] == ["compact_table attempt 0"]
    assert any("`expires_at`" in e and "39 s ago" in e and "does not free" in e for e in top["evidence"]), top["evidence"]


def test_the_twin_with_its_expiry_ahead_is_not_called_a_hang(tmp_path: Path) -> None:
    # GIVEN the twin's readings with the expiry put 30 s ahead of the sample
    verdict, _pattern, _culprits, summary = _answer(capture_variant(tmp_path, MIXUP, stacks=_set_expiry(30.0)))
    assert verdict == "inconclusive" and "(in 30 s)" in summary, summary


def _loop(code: str) -> ast.While | ast.For | ast.AsyncFor:
    node = ast.parse(code).body[0]
    assert isinstance(node, (ast.While, ast.For, ast.AsyncFor))
    return node


def test_the_times_a_loop_ends_at_are_read_from_its_source_not_from_names() -> None:
    # GIVEN loops that bind a time with what their exit tests read, or compare it with the clock
    assert _timed_names(_loop("while True:\n    ok, who, t = ray.get(a.f.remote())\n    if ok:\n        break\n"
                              "    time.sleep(1)\n")) == {"ok": ANSWER, "who": ANSWER, "t": ANSWER}
    assert _timed_names(_loop("while time.time() < until:\n    time.sleep(1)\n")) == {"until": CLOCK_TEST}
    # THEN a start time in arithmetic, a timer that ends no loop, a clock read, are no such time
    assert _timed_names(_loop("while time.time() - start < limit:\n    time.sleep(1)\n")) == {}
    assert _timed_names(_loop("while not done():\n    if time.time() > next_log:\n        log()\n"
                              "    now = time.time()\n    time.sleep(1)\n")) == {}


def test_wall_times_in_seconds_or_milliseconds_are_times_and_monotonic_values_are_not() -> None:
    now = 1796418172.9
    assert _wall_time(now + 80, now) == pytest.approx(now + 80)
    assert _wall_time((now + 80) * 1000, now) == pytest.approx(now + 80)
    assert _wall_time(64_911.2, now) is None  # seconds since boot
    assert _wall_time(True, now) is None and _wall_time("1796418252", now) is None


def test_a_poll_whose_expiry_only_the_polled_actor_keeps_is_never_called_hung() -> None:
    # GIVEN a real capture (tests/data/captures/healthy_lease_retry_ttl_in_holder): the retry polls
    # `while not ray.get(table.try_acquire.remote(...))`, a bare bool; the TTL lives in the table's state
    verdict, pattern, culprits, summary = _answer(CAPTURES / "healthy_lease_retry_ttl_in_holder")
    # THEN with no holder named and no expiry visible, it stays inconclusive, the retry as the candidate
    assert (verdict, pattern) == ("inconclusive", "poll-never-satisfied"), summary
    assert culprits == ["compact_table"]
    assert "freed by a TTL" in summary
