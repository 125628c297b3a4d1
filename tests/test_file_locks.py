"""OS file locks: the node probe's /proc reads on a real lock, and the analysis on the recorded
run_dir_file_lock capture (an actor holds a run dir's flock across ray.get into the actor that
blocks taking it)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.analyse.patterns import catalog
from debug_hang.analyse.rootcause import find_cycles
from debug_hang.pipeline import reanalyse
from debug_hang.probe.file_locks import locks_of, parse_locks, read_locks, thread_wchans

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "cases" / "run_dir_file_lock"
# A child that blocks taking the lock the test holds, in a function, so its line is known.
_WAITER = "import fcntl, sys\nfh = open(sys.argv[1], 'a')\nfcntl.{call}(fh, fcntl.LOCK_EX)\n"


def _wait_until_blocked(pid: int, timeout_s: float = 60.0) -> None:
    """Until /proc/locks lists `pid` waiting (a Python start-up takes seconds on a loaded machine)."""
    end = time.monotonic() + timeout_s
    while not any(lock["waiting"] for lock in locks_of([pid], read_locks()[0]).get(pid, [])):
        assert time.monotonic() < end, f"pid {pid} never blocked on the lock within {timeout_s:.0f}s"
        time.sleep(0.05)


@pytest.fixture(params=["flock", "lockf"])
def blocked_waiter(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, str, str]]:
    """(waiter pid, lock path, call): this process holds an exclusive lock; a real child waits for it."""
    path = tmp_path / "run" / ".lock"
    path.parent.mkdir()
    call = str(request.param)
    with open(path, "a") as fh:
        getattr(fcntl, call)(fh, fcntl.LOCK_EX)
        child = subprocess.Popen([sys.executable, "-c", _WAITER.format(call=call), str(path)])
        try:
            _wait_until_blocked(child.pid)
            yield child.pid, str(path), call
        finally:
            child.kill()
            child.wait(timeout=10)


def test_probe_reads_holder_waiter_path_and_kernel_wait(blocked_waiter: tuple[int, str, str]) -> None:
    # GIVEN a child blocked taking a lock this process holds (flock, or a POSIX lock with lockf)
    waiter, path, call = blocked_waiter
    # WHEN the node probe's readers look at /proc
    rows, cut = read_locks()
    locks = locks_of([waiter, os.getpid()], rows)
    wchans = thread_wchans(waiter)
    # THEN /proc/locks names this process as the holder and the child as waiting, on that file
    assert not cut
    (wait,) = locks[waiter]
    assert wait["waiting"] and wait["path"] == path and wait["access"] == "WRITE"
    assert wait["type"] == ("FLOCK" if call == "flock" else "POSIX")
    assert [h["pid"] for h in wait["holders"]] == [os.getpid()]
    held = next(lock for lock in locks[os.getpid()] if lock["inode"] == wait["inode"])
    assert held["waiters"] == [waiter] and not held["waiting"]
    # AND the child's thread sleeps in a kernel function the catalog calls a file-lock wait
    kernel = catalog()["file-lock-wait"].kernel_waits
    assert any(r.search(name) for name in wchans.values() for r in kernel), wchans


def test_parse_locks_skips_what_is_not_a_lock_row() -> None:
    rows = parse_locks("1: FLOCK  ADVISORY  WRITE 7346 fe:00:2147089 0 EOF\n"
                       "1: -> FLOCK  ADVISORY  WRITE 7387 fe:00:2147089 0 EOF\n"
                       "2: POSIX  ADVISORY  WRITE -1 00:1a:12 0 EOF\n"
                       "3: LEASE  ACTIVE    READ 12 fe:0")
    assert [(r["pid"], r["waiting"], r["inode"]) for r in rows] == [(7346, False, 2147089), (7387, True, 2147089)]


def test_recorded_flock_cycle_is_a_file_lock_deadlock() -> None:
    # GIVEN the recorded capture: CheckpointManager holds <run_dir>/.lock and waits on MetricsWriter.flush
    diag = reanalyse(CASE)
    top = diag.causes[0]
    # THEN the cycle goes through the file lock and names both actors
    assert top.pattern == "file-lock-deadlock"
    assert sorted(c.class_name or "" for c in top.culprits) == ["CheckpointManager", "MetricsWriter"]
    (cycle,) = find_cycles(diag.graph)
    lock_edges = [e for e in diag.graph.edges if e.why == "file-lock-wait"]
    assert len(lock_edges) == 1 and lock_edges[0].src in cycle and lock_edges[0].dst in cycle
    writer, manager = diag.graph.nodes[lock_edges[0].src], diag.graph.nodes[lock_edges[0].dst]
    assert (writer.class_name, manager.class_name) == ("MetricsWriter", "CheckpointManager")
    # AND the evidence gives the lock file's path and the line that takes it
    text = lock_edges[0].evidence
    assert "/.lock" in text and "run_dir_file_lock.py:52" in text and "fcntl.flock(fh, fcntl.LOCK_EX)" in text
    assert f"pid {manager.pid}" in text
    assert writer.pattern == "file-lock-wait"
    assert any("locks_lock_inode_wait" in e for e in writer.evidence)


def _without_locks(tmp_path: Path, edit: Any) -> Path:
    out = tmp_path / CASE.name
    shutil.copytree(CASE, out)
    doc = json.loads((out / "stacks.json").read_text())
    for info in doc["meta"]["info"]:
        edit(info)
    (out / "stacks.json").write_text(json.dumps(doc))
    return out


def test_without_the_kernel_lock_table_the_line_alone_decides_nothing(tmp_path: Path) -> None:
    # GIVEN the same capture without what the probe read from /proc/locks
    case = _without_locks(tmp_path, lambda info: info.pop("file_locks", None))
    # THEN the fcntl.flock line is not taken for a lock wait: no file-lock finding
    diag = reanalyse(case)
    assert all(not c.pattern.startswith("file-lock") for c in diag.causes)
    assert not [e for e in diag.graph.edges if e.why == "file-lock-wait"]


def test_without_wchan_the_lock_table_still_closes_the_cycle(tmp_path: Path) -> None:
    # GIVEN the capture without thread wchans (a kernel that hides them reads "0")
    case = _without_locks(tmp_path, lambda info: info.pop("wchan", None))
    # THEN /proc/locks alone still gives the edge; the waiting thread is the deciding one
    diag = reanalyse(case)
    assert diag.causes[0].pattern == "file-lock-deadlock"


# Takes the lock, hands the open file to a child that outlives it, and exits (a launcher script).
_LAUNCHER = ("import fcntl, subprocess, sys\nfh = open(sys.argv[1], 'a')\nfcntl.flock(fh, fcntl.LOCK_EX)\n"
             "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], pass_fds=[fh.fileno()],\n"
             "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
             "print(child.pid, flush=True)\n")


def test_a_flock_inherited_by_a_child_is_held_by_the_child(tmp_path: Path) -> None:
    # GIVEN a lock taken by a process that exited, its open file inherited by a live child,
    # and a waiter blocked on it (/proc/locks still names the exited pid)
    path = tmp_path / ".lock"
    launcher = subprocess.run([sys.executable, "-c", _LAUNCHER, str(path)], capture_output=True, text=True,
                              timeout=30, check=True)
    heir = int(launcher.stdout.split()[0])
    waiter = subprocess.Popen([sys.executable, "-c", _WAITER.format(call="flock"), str(path)])
    try:
        _wait_until_blocked(waiter.pid)
        # WHEN the probe reads the locks of the waiter and the child
        (wait,) = locks_of([waiter.pid, heir], read_locks()[0])[waiter.pid]
        # THEN the holder is the child that has the file open, not the pid that exited
        assert [h["pid"] for h in wait["holders"]] == [heir]
        assert wait["holders"][0]["inherited_from"] not in (heir, waiter.pid)
    finally:
        waiter.kill()
        waiter.wait(timeout=10)
        os.kill(heir, 9)


def test_a_holder_outside_the_job_is_the_end_of_the_chain(tmp_path: Path) -> None:
    # GIVEN the recorded capture, the lock's holder re-pointed to a process that is not the job's
    # (as a shell or an earlier run's leftover would be), the manager's own lock entry dropped
    def elsewhere(info: dict[str, Any]) -> None:
        for lock in info.get("file_locks") or []:
            for holder in lock.get("holders") or []:
                holder.update(pid=999_999, title="python leftover_run.py")
        if not any(lock.get("waiting") for lock in info.get("file_locks") or []):
            info.pop("file_locks", None)
    diag = reanalyse(_without_locks(tmp_path, elsewhere))
    # THEN the writer waits on that process, which is named for holding the lock
    holder = next(n for n in diag.graph.nodes.values() if n.pid == 999_999)
    assert holder.pattern == "file-lock-held" and holder.name == "python leftover_run.py"
    cause = diag.causes[0]
    assert diag.verdict == "hang" and cause.pattern == "file-lock-held"
    assert [c.pid for c in cause.culprits] == [999_999]
    assert any("/.lock" in e for e in cause.evidence)
