"""A second sqlite3 connection of the same process that writes while the first holds the write
transaction, on a real capture (tests/data/captures/sqlite_second_connection_same_thread,
redteam/sqlite_audit_second_connection.py): SQLite refuses it itself (POSIX locks are the
process's), its busy handler retries in C, and /proc/locks names the waiter's own pid."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.file_locks import read_locks
from debug_hang.probe.kernel_objects import locks_held_by_others
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "sqlite_second_connection_same_thread"
PID = 1385  # ResultsStore, the waiter and the holder


def _polls(doc: dict[str, Any]) -> list[dict[str, Any]]:
    infos = doc["meta"]["info"]
    info = next(i for i in (infos if isinstance(infos, list) else infos.values()) if i.get("pid") == PID)
    return info["lock_polls"]


def test_a_busy_retry_on_its_own_processes_sqlite_write_lock_is_a_self_deadlock() -> None:
    # GIVEN ResultsStore asleep in one C call (execute) while /proc/locks lists its own RESERVED lock
    doc = to_json(reanalyse(CAPTURE))
    # THEN a hang, lock-self-deadlock, at the inner connection's execute line, with the sqlite fix
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "lock-self-deadlock"
    assert cause["culprits"][0]["class_name"] == "ResultsStore"
    assert "second connection" in cause["proof"]["fix"], cause["proof"]["fix"]
    assert any("this very process" in e for e in cause["evidence"]), cause["evidence"]


def test_the_same_wait_on_a_lock_another_process_holds_is_followed_to_it(tmp_path: Path) -> None:
    # GIVEN the same reading with the holder a process of the node outside the job
    def other(doc: dict[str, Any]) -> None:
        for poll in _polls(doc):
            for holder in poll["holders"]:
                holder["pid"], holder["title"] = 4242, "sqlite3 results.db"
    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=other)))
    # THEN no self-deadlock: the wait leads to that holder
    causes = doc["root_causes"]
    assert not causes or causes[0]["pattern"] != "lock-self-deadlock", doc["summary"]
    assert "4242" in doc["summary"] or any("4242" in e for c in causes for e in c["evidence"]), doc["summary"]


def test_without_the_probes_lock_reading_it_is_not_called_a_self_deadlock(tmp_path: Path) -> None:
    def drop(doc: dict[str, Any]) -> None:
        infos = doc["meta"]["info"]
        for info in (infos if isinstance(infos, list) else infos.values()):
            info.pop("lock_polls", None)
    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=drop)))
    assert doc["verdict"] != "hang" or doc["root_causes"][0]["pattern"] != "lock-self-deadlock", doc["summary"]


def test_the_probe_keeps_sqlites_write_lock_held_by_the_process_itself(tmp_path: Path) -> None:
    # GIVEN this process holding a write transaction open on a real database
    path = tmp_path / "t.db"
    first = sqlite3.connect(path, isolation_level=None)
    first.execute("CREATE TABLE t (x)")
    first.execute("BEGIN IMMEDIATE")
    first.execute("INSERT INTO t VALUES (1)")
    try:
        # WHEN the probe reads the locks on the files it has open
        found = locks_held_by_others(os.getpid(), read_locks()[0])
        # THEN its own RESERVED lock is listed, under its own pid
        mine = [f for f in found if f["path"] == str(path)]
        assert mine and [h["pid"] for h in mine[0]["holders"]] == [os.getpid()], found
        assert any(lock["access"] == "WRITE" for lock in mine[0]["holders"][0]["locks"])
    finally:
        first.execute("ROLLBACK")
        first.close()


def test_a_call_younger_than_a_busy_timeout_is_not_called_a_self_deadlock(tmp_path: Path) -> None:
    # GIVEN the same reading with ResultsStore.record started 2 s before the reading: sqlite3's
    # default busy timeout (5 s) may still end the execute with "database is locked"
    def young(doc: dict[str, Any]) -> None:
        for t in doc["tasks"]:
            if t.get("worker_pid") == PID and t.get("state") == "RUNNING":
                t["start_time_ms"] = (doc["taken_at"] - 2.0) * 1000.0
    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, snapshot=young)))
    causes = doc["root_causes"]
    assert not causes or causes[0]["pattern"] != "lock-self-deadlock", doc["summary"]
