"""A retried task's poll for what its dead first attempt holds, and an actor call cycle through a
constructor, on real recorded captures (tests/data/captures/README.md).

`lease_held_by_prior_attempt/` (`redteam/lease_held_by_prior_attempt.py`): compact_table's attempt 0
took an application lease (a LeaseServer actor, no TTL) and its worker died (os._exit, WORKER_DIED);
attempt 1 runs, in its own frames, a poll (`time.sleep(1.0)` between `ray.get(server.try_acquire
.remote(...))` calls that finish every round) and logs "busy, held by compact-XXXX" every second,
XXXX the token attempt 0 printed. The retry is past its restart (never "being retried, diagnose
again"), and its poll waits for a holder that is gone: hang, culprit attempt 0.
`ctor_handshake_cycle/` (`redteam/ctor_handshake_cycle.py`): ShardServer.__init__ waits on
Registry.register, which waits on ShardServer.ping, queued until the constructor returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
LEASE = CAPTURES / "lease_held_by_prior_attempt"
CTOR = CAPTURES / "ctor_handshake_cycle"


def _attempts(folder: Path) -> dict[int, dict[str, Any]]:
    rows = json.loads((folder / "snapshot.json").read_text())["tasks"]
    return {int(t["attempt_number"]): t for t in rows if t["name"] == "compact_table"}


def _without_dead_lines(tmp_path: Path) -> Path:
    """The capture with every line the dead attempt printed removed from the saved logs (its pid's
    lines in the driver log, its own worker log): the poll's token is then printed by nobody seen."""
    out = capture_variant(tmp_path, LEASE)
    dead = _attempts(LEASE)[0]["worker_pid"]
    for log in (out / "logs").iterdir():
        lines = log.read_text().splitlines(keepends=True)
        log.write_text("".join(ln for ln in lines if f"pid={dead})" not in ln))
    ev = json.loads((out / "evidence.json").read_text())
    for node in ev["per_node"].values():
        for name in [n for n in node.get("logs", {}) if n.startswith("dead-")]:
            (out / node["logs"].pop(name)).unlink(missing_ok=True)
    (out / "evidence.json").write_text(json.dumps(ev))
    return out


def test_a_retry_polling_for_its_dead_attempts_lease_is_a_hang_on_that_attempt() -> None:
    # GIVEN attempt 0 FAILED (WORKER_DIED) after printing its owner token, attempt 1 RUNNING in its
    # poll loop, its log repeating "busy, held by <that token>"
    dead, retry = _attempts(LEASE)[0], _attempts(LEASE)[1]
    assert dead["state"] == "FAILED" and dead["error_type"] == "WORKER_DIED" and retry["state"] == "RUNNING"
    # WHEN re-analysed
    diag = reanalyse(LEASE)
    doc = to_json(diag)
    # THEN a hang, never "being restarted or retried": the culprit is attempt 0 (its dead worker),
    # the retry a victim, and the summary quotes the token both printed
    assert doc["verdict"] == "hang", doc["summary"]
    assert "being restarted or retried" not in doc["summary"]
    top = doc["root_causes"][0]
    assert top["pattern"] == "poll-never-satisfied"
    assert [c["pid"] for c in top["culprits"]] == [dead["worker_pid"]]
    assert "attempt 0" in top["culprits"][0]["name"]
    retry_key = next(k for k, n in diag.graph.nodes.items() if n.pid == retry["worker_pid"])
    assert retry_key in diag.causes[0].victims
    token = next(ln.split(":")[0] for ln in (LEASE / "logs" / "driver.log").read_text().splitlines()
                 if f"pid={dead['worker_pid']})" in ln and "lease on" in ln).split()[-1]
    assert token in doc["summary"], doc["summary"]
    # (only the owner token is quoted: the table both attempts were given is an argument, no holder)
    assert "events_2026_12" not in doc["summary"], doc["summary"]
    assert "## Blocking chain" in render_markdown(diag)


def test_without_the_dead_attempts_words_the_retrys_poll_is_inconclusive(tmp_path: Path) -> None:
    # GIVEN the same capture with nothing the dead attempt printed left in its logs
    diag = reanalyse(_without_dead_lines(tmp_path))
    doc = to_json(diag)
    # THEN inconclusive on the retry's poll: named with its line, not "diagnose again in a few seconds"
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert doc["root_causes"][0]["pattern"] == "poll-never-satisfied"
    assert doc["root_causes"][0]["culprits"][0]["pid"] == _attempts(LEASE)[1]["worker_pid"]
    assert "time.sleep(1.0)" in doc["summary"] and "retry of a task whose earlier attempt died" in doc["summary"]
    assert "being restarted or retried" not in doc["summary"]


def test_a_live_call_of_the_job_may_hold_it(tmp_path: Path) -> None:
    # GIVEN the same capture with another task of the job RUNNING (a live party that may hold the
    # lease and release it)
    def add_writer(rows: list[dict[str, Any]]) -> None:
        retry = next(t for t in rows if t["name"] == "compact_table" and t["state"] == "RUNNING")
        rows.append({**retry, "task_id": "ab" * 12 + retry["task_id"][24:], "name": "writer",
                     "func_or_class_name": "writer", "attempt_number": 0, "worker_pid": retry["worker_pid"] + 1})

    doc = to_json(reanalyse(capture_variant(tmp_path, LEASE, tasks=add_writer)))
    # THEN never a hang on the dead attempt: the retry's poll, inconclusive
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "retry of a task whose earlier attempt died" in doc["summary"], doc["summary"]


def test_a_token_a_live_process_printed_names_no_dead_holder(tmp_path: Path) -> None:
    # GIVEN the capture whose driver log also shows the holder token printed by the driver itself
    out = capture_variant(tmp_path, LEASE)
    dead = _attempts(LEASE)[0]["worker_pid"]
    log = out / "logs" / "driver.log"
    text = log.read_text()
    mine = [ln for ln in text.splitlines() if f"pid={dead})" in ln]
    assert mine
    log.write_text(text + "".join(ln.split(") ", 1)[1] + "\n" for ln in mine))
    # THEN inconclusive on the retry's poll: the token is no sign of a holder that is gone
    doc = to_json(reanalyse(out))
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "retry of a task whose earlier attempt died" in doc["summary"], doc["summary"]


def test_healthy_twins_are_not_called_hung() -> None:
    # GIVEN the retries of healthy_lease_retry_live_holder (a live writer holds the lease, releases
    # it after 4 min) and healthy_lease_retry_ttl (the dead attempt's lease expires after 15 s)
    for name in ("healthy_lease_retry_live_holder", "healthy_lease_retry_ttl"):
        folder = CAPTURES / name
        if not folder.exists():
            pytest.skip(f"{name} not recorded")
        doc = to_json(reanalyse(folder))
        # THEN never a hang
        assert doc["verdict"] != "hang", (name, doc["summary"])


def test_the_constructor_that_waits_on_a_call_back_into_it_is_named_first() -> None:
    # GIVEN ShardServer in __init__ (creation task RUNNING) in ray.get on Registry.register, and
    # Registry.register in ray.get on ShardServer.ping, queued behind that constructor
    doc = to_json(reanalyse(CTOR))
    # THEN the cycle, ShardServer (its constructor's wait) first, with the queued call as evidence
    assert doc["verdict"] == "hang"
    top = doc["root_causes"][0]
    assert top["pattern"] == "actor-call-cycle"
    assert [c["class_name"] for c in top["culprits"]] == ["ShardServer", "Registry"]
    assert any("constructor ShardServer.__init__" in e and "ShardServer.ping" in e for e in top["evidence"])


def test_only_a_running_constructor_names_its_member_first(tmp_path: Path) -> None:
    # GIVEN the same capture with ShardServer's creation task FINISHED (a plain method cycle)
    def finished(rows: list[dict[str, Any]]) -> None:
        for t in rows:
            if t["type"] == "ACTOR_CREATION_TASK":
                t["state"] = "FINISHED"

    doc = to_json(reanalyse(capture_variant(tmp_path, CTOR, tasks=finished)))
    # THEN the cycle in its own order, no constructor evidence; with it RUNNING, ShardServer first
    top = doc["root_causes"][0]
    assert top["pattern"] == "actor-call-cycle"
    assert not any("its constructor" in e for e in top["evidence"])
    assert to_json(reanalyse(CTOR))["root_causes"][0]["culprits"][0]["class_name"] == "ShardServer"

