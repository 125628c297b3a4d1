"""A flock taken twice by one thread through two open() calls of the same file, on a real capture
(tests/data/captures/flock_taken_twice_same_process, redteam/flock_two_fds_same_process.py):
/proc/locks names the waiting process itself as the holder. A flock belongs to the open file
description, so the second request blocks on the first: lock-self-deadlock, the inner take's line.
A holder that is another process, a POSIX lock, or another thread of the process in job code
(which could unlock or close the holding descriptor) is not that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "flock_taken_twice_same_process"


def _waits(stacks: dict[str, Any]) -> list[dict[str, Any]]:
    return [lock for info in stacks["meta"]["info"] for lock in info.get("file_locks") or [] if lock.get("waiting")]


def test_a_flock_held_by_the_waiting_process_itself_is_a_self_deadlock() -> None:
    # GIVEN VocabCache asleep in flock, /proc/locks naming its own pid as the FLOCK's holder
    doc = to_json(reanalyse(CAPTURE))
    # THEN a hang: lock-self-deadlock in VocabCache, deciding line the inner `with cache_lock(...)`
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "lock-self-deadlock", doc["summary"]
    assert cause["culprit"]["class_name"] == "VocabCache", cause["culprit"]
    deciding = cause["proof"]["deciding"]
    assert (deciding["function"], deciding["line"]) == ("VocabCache._write_atomic", 42), deciding
    assert any("a file lock its own process holds" in e for e in cause["evidence"]), cause["evidence"]
    assert any("belongs to the open file, not the process" in e for e in cause["evidence"]), cause["evidence"]


def test_the_same_wait_on_a_lock_another_process_holds_is_no_self_deadlock(tmp_path: Path) -> None:
    # GIVEN the same capture with the holder another process of the node, not of the job
    def other_holder(stacks: dict[str, Any]) -> None:
        for lock in _waits(stacks):
            lock["holders"] = [{"pid": 4242, "title": "python other.py"}]

    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=other_holder)))
    # THEN no self-deadlock is claimed: the wait leads to that holder
    assert "lock-self-deadlock" not in {c["pattern"] for c in doc["root_causes"]}, doc["summary"]
    assert "(pid 4242)" in doc["summary"], doc["summary"]


def test_a_posix_lock_of_the_same_process_is_no_self_deadlock(tmp_path: Path) -> None:
    # GIVEN the wait read as a POSIX (fcntl/lockf) lock: per process, it never blocks on itself
    def posix(stacks: dict[str, Any]) -> None:
        for info in stacks["meta"]["info"]:
            for lock in info.get("file_locks") or []:
                lock["type"] = "POSIX"

    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=posix)))
    # THEN no self-deadlock is claimed, and no hang
    assert "lock-self-deadlock" not in {c["pattern"] for c in doc["root_causes"]}, doc["summary"]
    assert doc["verdict"] != "hang", doc["summary"]


def test_another_thread_of_the_process_in_job_code_may_hold_it(tmp_path: Path) -> None:
    # GIVEN the same capture with VocabCache's other thread inside job code (it could unlock or close the fd)
    def busy_thread(stacks: dict[str, Any]) -> None:
        for proc in stacks["processes"]:
            if proc.get("actor_class") != "VocabCache":
                continue
            main = next(t for t in proc["threads"] if t["name"] == "MainThread")
            other = next(t for t in proc["threads"] if t["name"] != "MainThread")
            job = next(f for f in main["frames"] if f["function"] == "VocabCache.rebuild")
            other["frames"] = [dict(job, function="VocabCache._compact", line=51, code="words = sorted(words)")] + other["frames"]

    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=busy_thread)))
    # THEN no self-deadlock (nor hang) is claimed, and the evidence says who may release it
    assert "lock-self-deadlock" not in {c["pattern"] for c in doc["root_causes"]}, doc["summary"]
    assert doc["verdict"] != "hang", doc["summary"]
    assert any("which this same process holds through another descriptor (/proc/locks); thread PythonGCThread" in e
               for c in doc["root_causes"] for e in c["evidence"]), doc["root_causes"]
