"""The job is left as it was: a py-spy killed mid-dump leaves no target stopped.

Real processes, real py-spy. py-spy 0.4 attaches without a group stop, so killing it at random
moments of a dump is checked first (it must never leave the target in state T); a tracer that
does leave it stopped (what py-spy issues report for older versions and killed tracers) cannot be
produced on demand, so a stand-in py-spy on the command line stops the target and hangs until
it is killed: the dump must then resume the target and say so.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from debug_hang.probe.node_probe import probe_node
from debug_hang.probe.pyspy import (
    DUMP_TIMEOUT,
    STOPPED_STATES,
    TARGET_RESUMED,
    DumpOptions,
    dump_pid,
    find_pyspy,
    process_state,
)

pytestmark = pytest.mark.unit

TARGET = """
import threading, time
def spin():
    while True:
        time.sleep(0.001)
for _ in range(8):
    threading.Thread(target=spin, daemon=True).start()
print("up", flush=True)
while True:
    time.sleep(0.01)
"""

# Stops the process it is asked to dump, then hangs until killed.
STOPPING_PYSPY = """#!/bin/sh
while [ $# -gt 0 ]; do
  if [ "$1" = "--pid" ]; then kill -STOP "$2"; fi
  shift
done
exec sleep 60
"""


@pytest.fixture
def target() -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", TARGET], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    try:
        yield proc.pid
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def stopping_pyspy(tmp_path: Path) -> str:
    path = tmp_path / "bin" / "py-spy"
    path.parent.mkdir()
    path.write_text(STOPPING_PYSPY)
    path.chmod(0o755)
    return str(path)


def test_real_pyspy_killed_at_any_moment_never_leaves_the_target_stopped(target: int) -> None:
    # GIVEN a running Python process and the real py-spy
    if find_pyspy() is None:
        pytest.skip("py-spy not installed")
    killed = 0
    # WHEN dumps are cut by tiny timeouts, at many different moments of the dump
    for i in range(30):
        result = dump_pid(target, DumpOptions(timeout_s=0.002 + 0.003 * (i % 10)))
        killed += result.kind == DUMP_TIMEOUT
        # THEN after each one the target runs (S or R), never stopped
        assert process_state(target) not in STOPPED_STATES, result
    assert killed > 0  # some dumps really were killed mid-way


def test_a_target_left_stopped_by_a_killed_pyspy_is_resumed_and_reported(target: int, stopping_pyspy: str) -> None:
    # GIVEN a py-spy that stops its target and hangs
    # WHEN the dump times out and is killed
    start = time.monotonic()
    result = dump_pid(target, DumpOptions(timeout_s=1.0), pyspy=stopping_pyspy)
    # THEN the dump is a timeout, the target was resumed, and the result says so
    assert result.kind == DUMP_TIMEOUT and time.monotonic() - start < 10
    assert result.note_kind == TARGET_RESUMED and "SIGCONT" in (result.note or "")
    time.sleep(0.1)
    assert process_state(target) not in STOPPED_STATES


def test_a_target_stopped_before_the_dump_is_left_stopped(target: int, stopping_pyspy: str) -> None:
    # GIVEN a target someone stopped on purpose (a debugger, a job control stop)
    os.kill(target, signal.SIGSTOP)
    time.sleep(0.1)
    assert process_state(target) in STOPPED_STATES
    # WHEN it is dumped and the dump times out
    result = dump_pid(target, DumpOptions(timeout_s=1.0), pyspy=stopping_pyspy)
    # THEN it is not resumed: it is left as it was
    assert result.note_kind != TARGET_RESUMED
    assert process_state(target) in STOPPED_STATES


def test_the_node_probe_reports_the_resume(target: int, stopping_pyspy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the stopping py-spy first on PATH  WHEN the node probe dumps the target
    monkeypatch.setenv("PATH", f"{Path(stopping_pyspy).parent}:{os.environ['PATH']}")
    value = probe_node("local", [target], DumpOptions(timeout_s=1.0).to_dict(), samples=1, children=False)
    # THEN the target runs and the probe reports both the timeout and the resume
    kinds = {e["kind"] for e in value["errors"]}
    assert {DUMP_TIMEOUT, TARGET_RESUMED} <= kinds, value["errors"]
    assert process_state(target) not in STOPPED_STATES


def test_a_command_run_on_a_node_that_is_killed_resumes_its_pid(target: int, stopping_pyspy: str) -> None:
    # GIVEN `run_on_each_ray_node.py -- py-spy dump --pid N` where that py-spy stops N and hangs
    from debug_hang.probe.commands import COMMAND_TIMEOUT, run_command

    # WHEN the command times out and its process group is killed
    result = run_command([stopping_pyspy, "dump", "--pid", str(target)], timeout_s=1.0)
    # THEN N runs again, and the result says it was resumed
    assert result["kind"] == COMMAND_TIMEOUT and "SIGCONT" in result["error"], result
    assert process_state(target) not in STOPPED_STATES


def test_a_probe_answers_by_its_absolute_deadline_with_what_it_has(target: int) -> None:
    # GIVEN a probe asked for 5 samples 1 s apart, but whose caller stops waiting in 2 s
    if find_pyspy() is None:
        pytest.skip("py-spy not installed")
    start = time.monotonic()
    value = probe_node("local", [target], DumpOptions().to_dict(), samples=5, interval_s=1.0, children=False,
                       budget_s=60.0, deadline_epoch=time.time() + 2.0)
    # THEN it answers in time, with the samples it could take (not nothing)
    assert time.monotonic() - start < 4.0
    assert 1 <= value["samples_taken"] < 5 and value["processes"]
