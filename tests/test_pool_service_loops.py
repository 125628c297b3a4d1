"""A thread pool whose every worker runs a service loop nothing ends, while a thread waits on the
pool's queued Futures, on a real capture (tests/data/captures/executor_occupied_by_watchers,
redteam/executor_occupied_by_watchers.py, round 12): ShardFetcher's two pool workers loop
`while not self.stop.wait(1):` (no code of the class sets `self.stop`), `fetch` waits
FIRST_COMPLETED on three downloads queued behind them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.busy import event_paced_loop
from debug_hang.model import Frame
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "executor_occupied_by_watchers"
WATCHERS = ("ShardFetcher._watch_lease", "ShardFetcher._watch_config")


def _job_frames(doc: dict[str, Any], function: str) -> list[dict[str, Any]]:
    return [f for p in doc["processes"] for t in p["threads"] for f in t["frames"] if f["function"] == function]


def _culprit(folder: Path) -> tuple[str, str, int | None, str]:
    doc = to_json(reanalyse(folder))
    top = doc["root_causes"][0]
    return doc["verdict"], top["pattern"], top["proof"]["deciding"]["line"], top["fix"]


def test_pool_workers_in_loops_nothing_ends_are_the_culprit_of_the_wait_on_queued_futures() -> None:
    # GIVEN fetch_0/fetch_1 (the pool's only workers) at `while not self.stop.wait(1):` in both
    # samples, no setter of `self.stop` in the class, MainThread in cf.wait on the pool's Futures
    verdict, pattern, line, fix = _culprit(CAPTURE)
    # THEN hung: the pool is taken by the service loops (their loop line), the waiter their victim
    assert (verdict, pattern) == ("hang", "executor-self-wait")
    assert line in (36, 42)  # `_watch_lease` / `_watch_config`'s loop, not fetch's `cf.wait` (52)
    assert "service loops" in fix
    node = next(n for n in reanalyse(CAPTURE).graph.nodes.values() if n.pattern == "executor-self-wait")
    assert node.class_name == "ShardFetcher"
    assert sum("no code of its class sets it" in e for e in node.evidence) == 2, node.evidence


def test_a_setter_of_the_event_in_the_class_leaves_it_open(tmp_path: Path) -> None:
    # GIVEN the same readings, but the class has a `shutdown` that sets `self.stop` (a later call could end the loops)
    def add_setter(doc: dict[str, Any]) -> None:
        for name in WATCHERS:
            for frame in _job_frames(doc, name):
                frame["setters"] = ["ShardFetcher.shutdown:60"]
    verdict, pattern, _line, _fix = _culprit(capture_variant(tmp_path, CAPTURE, stacks=add_setter))
    # THEN not hung by this rule
    assert verdict != "hang" and pattern != "executor-self-wait", (verdict, pattern)


def test_a_setter_only_after_the_waiters_line_still_cannot_end_the_loops(tmp_path: Path) -> None:
    # GIVEN `self.stop.set()` only in fetch, after its `cf.wait` (line 52): it runs once the wait returns
    def set_after_wait(doc: dict[str, Any]) -> None:
        for name in WATCHERS:
            for frame in _job_frames(doc, name):
                frame["setters"] = ["ShardFetcher.fetch:54"]
    verdict, pattern, _line, _fix = _culprit(capture_variant(tmp_path, CAPTURE, stacks=set_after_wait))
    assert (verdict, pattern) == ("hang", "executor-self-wait")


def test_a_worker_that_moves_on_between_samples_leaves_it_open(tmp_path: Path) -> None:
    # GIVEN fetch_0 at another line of its job in the second sample (its loop is not stuck)
    def move_on(doc: dict[str, Any]) -> None:
        second = next(p for p in doc["processes"] if p["role"] == "actor" and p["sample"] == 1)
        worker = next(t for t in second["threads"] if t["name"] == "fetch_0")
        frame = next(f for f in worker["frames"] if f["function"] == "ShardFetcher._watch_lease")
        frame["line"], frame["code"] = 38, "self.lease_ok = n >= 0"
    verdict, pattern, _line, _fix = _culprit(capture_variant(tmp_path, CAPTURE, stacks=move_on))
    assert verdict != "hang" and pattern != "executor-self-wait", (verdict, pattern)


def test_the_event_seen_set_leaves_it_open(tmp_path: Path) -> None:
    # GIVEN a worker's Event.wait seeing its Event set in the second sample (the loop is ending)
    def signaled(doc: dict[str, Any]) -> None:
        second = next(p for p in doc["processes"] if p["role"] == "actor" and p["sample"] == 1)
        worker = next(t for t in second["threads"] if t["name"] == "fetch_1")
        frame = next(f for f in worker["frames"] if f["function"] == "Event.wait")
        frame["facts"] = {**(frame["facts"] or {}), "signaled": True}
    verdict, pattern, _line, _fix = _culprit(capture_variant(tmp_path, CAPTURE, stacks=signaled))
    assert verdict != "hang" and pattern != "executor-self-wait", (verdict, pattern)


def test_a_waiter_with_a_timeout_leaves_it_open(tmp_path: Path) -> None:
    # GIVEN fetch's cf.wait given a timeout (it returns by itself)
    def timed(doc: dict[str, Any]) -> None:
        for frame in _job_frames(doc, "wait"):
            if (frame["facts"] or {}).get("timeout") == "None":
                frame["facts"]["timeout"] = 30
    verdict, pattern, _line, _fix = _culprit(capture_variant(tmp_path, CAPTURE, stacks=timed))
    assert pattern != "executor-self-wait", (verdict, pattern)


LOOP = ["35:         n = 0", "36:         while not self.stop.wait(1):", "37:             n += 1"]


@pytest.mark.parametrize(("body", "ends"), [
    (["38:             self.lease_ok = n >= 0"], False),
    (["38:             if n > 100:", "39:                 break"], True),
    (["38:             self.stop.set()"], True),
    (["38:             self._refresh()"], True),
    (["38:             self.stop = None"], True),
    (["38:             shutdown(self)"], True),
])
def test_event_paced_loop_reads_whether_the_loop_can_end_itself(body: list[str], ends: bool) -> None:
    # GIVEN a `while not self.stop.wait(1):` loop and its body, as the probe's context lines
    frame = Frame(function="W._watch", file="w.py", line=36, code="while not self.stop.wait(1):",
                  context=[*LOOP, *body, f"{38 + len(body)}: ", f"{39 + len(body)}:     def other(self):"])
    # THEN it names `self.stop` only when nothing in the loop can end it
    assert (event_paced_loop(frame) is None) is ends
