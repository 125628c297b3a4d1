"""Two "right culprit, wrong mechanism" misses of red-team round 6, on their live captures
(tests/data/captures/README.md), each with the variants where the answer must change.

A wait on a run_coroutine_threadsafe Future waits on the thread that runs its loop: blocked only
when that thread is stuck in a sync call (or is the waiter, given the running loop); not running
when no thread of the process runs an event loop. A child asleep reading its stdin, whose write end
only its parent holds, while the parent sleeps reading the child's output, waits for input (a
prompt), not on a full pipe: pipe-full-deadlock needs the child asleep *writing* a full pipe (or
the parent waiting for it to exit).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.graph import children, loops
from debug_hang.pipeline import reanalyse
from debug_hang.probe.pipes import child_pipes
from debug_hang.report.markdown import render_markdown

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
LOOP = CAPTURES / "coroutine_on_a_loop_no_thread_runs"
PROMPT = CAPTURES / "child_at_prompt_parent_reads_output"
STDIN_EOF = CAPTURES / "child_reads_stdin_parent_holds_open"

Doc = dict[str, Any]




def answer(case: Path) -> tuple[str, str | None, list[str]]:
    diag = reanalyse(case)
    top = diag.causes[0] if diag.causes else None
    names = [c.class_name or c.name for c in top.culprits] if top else []
    return diag.verdict, (top.pattern if top else None), names


# --- a coroutine submitted to a loop -------------------------------------------------------------

def _client_threads(doc: Doc) -> list[list[dict[str, Any]]]:
    """The thread lists, one per sample, of the process that waits in Future.result."""
    return [p["threads"] for p in doc["processes"]
            if any(f["function"] == "Future.result" for t in p["threads"] for f in t["frames"])]


def _frame(function: str, file: str, line: int, code: str = "") -> dict[str, Any]:
    return {"function": function, "file": file, "line": line, "native": False, "code": code or None}


ASYNCIO = "/usr/lib/python3.11/asyncio/"
THREADING = "/usr/lib/python3.11/threading.py"


def _loop_thread(inner: list[dict[str, Any]], tid: int) -> dict[str, Any]:
    """A thread running an event loop (Thread(target=loop.run_forever)), `inner` its innermost frames."""
    outer = [_frame("BaseEventLoop._run_once", ASYNCIO + "base_events.py", 1922),
             _frame("BaseEventLoop.run_forever", ASYNCIO + "base_events.py", 607),
             _frame("Thread.run", THREADING, 982), _frame("Thread._bootstrap_inner", THREADING, 1045),
             _frame("Thread._bootstrap", THREADING, 1002)]
    return {"name": "embed-loop", "thread_id": tid, "os_thread_id": tid, "active": False, "gil": False,
            "frames": inner + outer}


def _job_file(doc: Doc) -> str:
    return next(f["file"] for ts in _client_threads(doc) for t in ts for f in t["frames"] if f["function"].endswith(".embed"))


def with_loop_thread(blocked: bool) -> Callable[[Doc], None]:
    """The loop's thread started: stuck in a sync call inside a coroutine (time.sleep), or idle in select."""
    def edit(doc: Doc) -> None:
        job = _job_file(doc)
        if blocked:
            inner = [_frame("_embed", job, 36, "time.sleep(3600)"),
                     _frame("Handle._run", ASYNCIO + "events.py", 80)]
        else:
            inner = [_frame("EpollSelector.select", "/usr/lib/python3.11/selectors.py", 468)]
        for threads in _client_threads(doc):
            threads.append(_loop_thread(inner, 999001))
    return edit


def submitted_to_running_loop(doc: Doc) -> None:
    """The same wait, the coroutine submitted (the line above the wait) to the loop the waiting thread runs."""
    for threads in _client_threads(doc):
        for thread in threads:
            for frame in thread["frames"]:
                if frame["function"].endswith(".embed"):
                    frame["context"] = [line.replace("self.loop)", "asyncio.get_event_loop())") for line in frame["context"]]


def test_a_future_of_a_loop_no_thread_runs_is_a_loop_not_running() -> None:
    # GIVEN a sync method of an async actor (on Ray's loop thread) in Future.result on a coroutine it
    # gave run_coroutine_threadsafe, and no other thread of the process in an event loop
    verdict, pattern, culprits = answer(LOOP)
    # THEN the loop it submitted to is not running (not: the waiter's own loop is blocked)
    assert (verdict, pattern) == ("hang", "async-loop-not-running")
    assert culprits == ["EmbeddingClient"]


def test_with_the_loops_thread_running_and_stuck_in_a_sync_call_the_loop_is_blocked(tmp_path: Path) -> None:
    verdict, pattern, culprits = answer(capture_variant(tmp_path, LOOP, with_loop_thread(blocked=True)))
    assert (verdict, pattern) == ("hang", "async-loop-blocked")
    assert culprits == ["EmbeddingClient"]


def test_with_the_loops_thread_running_and_idle_the_loop_is_not_called_not_running(tmp_path: Path) -> None:
    # An idle loop runs: its coroutine awaits something py-spy cannot show; never "not running"
    _verdict, pattern, _culprits = answer(capture_variant(tmp_path, LOOP, with_loop_thread(blocked=False)))
    assert pattern != "async-loop-not-running"


def test_a_thread_running_a_target_py_spy_cannot_show_may_run_the_loop(tmp_path: Path) -> None:
    # A loop written in C (uvloop) shows only Thread.run: never called "not running"
    def edit(doc: Doc) -> None:
        for threads in _client_threads(doc):
            threads.append(_loop_thread([], 999002) | {"frames": _loop_thread([], 999002)["frames"][2:]})
    _verdict, pattern, _culprits = answer(capture_variant(tmp_path, LOOP, edit))
    assert pattern != "async-loop-not-running"


def test_a_coroutine_submitted_to_the_waiters_own_loop_is_that_loop_blocked(tmp_path: Path) -> None:
    verdict, pattern, _culprits = answer(capture_variant(tmp_path, LOOP, submitted_to_running_loop))
    assert (verdict, pattern) == ("hang", "async-loop-blocked")


def test_without_the_rule_the_capture_reads_as_a_blocked_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # The rule decides it: with it disabled, the stack pattern alone says async-loop-blocked again.
    monkeypatch.setattr(loops, "_submitted_wait", lambda thread: None)
    assert answer(LOOP)[1] == "async-loop-blocked"


# --- a child at a prompt -------------------------------------------------------------------------

def _child_info(doc: Doc) -> dict[str, Any]:
    return next(i for i in doc["meta"]["info"] if i.get("std_pipes"))


def child_writes_stderr_full(doc: Doc) -> None:
    """The child asleep writing its stderr, a full pipe the parent never reads, while the parent
    reads its (empty) stdout: a pipe-full deadlock on stderr."""
    info = _child_info(doc)
    info["wchan"] = {tid: "anon_pipe_write" for tid in info["wchan"]}
    info["std_pipes"]["0"]["child_waits"] = []
    info["std_pipes"]["2"] = {"inode": 424242, "parent_ends": ["read"], "child_waits": ["write"], "parent_waits": []}
    info["progress"]["io"]["wchar"] = 0


def parent_not_reading(doc: Doc) -> None:
    """No thread of the parent asleep reading the child's output (it waits for the child otherwise)."""
    for pipe in _child_info(doc)["std_pipes"].values():
        pipe["parent_waits"] = []


def test_a_child_reading_stdin_while_its_parent_reads_its_output_waits_at_a_prompt() -> None:
    verdict, pattern, culprits = answer(PROMPT)
    assert (verdict, pattern) == ("hang", "child-awaits-input")
    assert culprits == ["DatasetFetcher"]  # the parent, which never answers; the child is its victim
    # and its fix answers the prompt or skips it, never a bare communicate() (that refuses the license)
    fix = next(line for line in render_markdown(reanalyse(PROMPT)).splitlines() if line.startswith("- **Fix**"))
    assert "non-interactive flag" in fix and "communicate()" not in fix


def test_a_child_blocked_writing_a_full_pipe_is_a_pipe_full_deadlock(tmp_path: Path) -> None:
    verdict, pattern, culprits = answer(capture_variant(tmp_path, PROMPT, child_writes_stderr_full))
    assert (verdict, pattern) == ("hang", "pipe-full-deadlock")
    assert culprits[0] == "DatasetFetcher"


def test_without_the_parents_read_the_stdin_wait_stays_the_end_of_file_deadlock(tmp_path: Path) -> None:
    # The prompt rests on the probe's reading of the parent asleep reading the child's output.
    verdict, pattern, _culprits = answer(capture_variant(tmp_path, PROMPT, parent_not_reading))
    assert (verdict, pattern) == ("hang", "pipe-full-deadlock")


def test_without_the_rule_the_prompt_reads_as_a_full_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(children, "_parent_reads", lambda pipes: None)
    assert answer(PROMPT)[1] == "pipe-full-deadlock"


def test_a_parent_waiting_for_its_child_to_exit_keeps_the_stdin_end_of_file_deadlock() -> None:
    # The earlier capture (parent in proc.wait(), child reading to end-of-file): unchanged.
    verdict, pattern, _culprits = answer(STDIN_EOF)
    assert (verdict, pattern) == ("hang", "pipe-full-deadlock")


# --- the probe's reading, on real processes --------------------------------------------------------

PROMPTING = "print('resolving', flush=True)\nanswer = input('Accept? [y/N] ')\n"
FLOODS_STDERR = "import sys\nprint('resolving', flush=True)\nsys.stderr.write('x' * 200000)\n"
PARENT = ("import subprocess, sys\n"
          "proc = subprocess.Popen([sys.executable, '-c', {child!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, "
          "stderr=subprocess.PIPE, text=True)\n"
          "for line in proc.stdout:\n    pass\n")


def _pipes_of_family(child_code: str, settled: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The pipe facts of the child of a parent that reads the child's stdout line by line."""
    parent = subprocess.Popen([sys.executable, "-c", PARENT.format(child=child_code)], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        facts: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            found = subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split()
            facts = child_pipes(int(found[0]), parent.pid) if found else None
            if facts is not None and settled(facts):
                break
            time.sleep(0.2)
        assert facts is not None, "the parent did not start its child"
        return facts
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(parent.pid)], check=False)
        parent.kill()
        parent.wait()


def test_the_probe_reads_a_child_reading_stdin_and_its_parent_reading_the_childs_stdout() -> None:
    facts = _pipes_of_family(PROMPTING, lambda f: bool(f["std_pipes"]["0"]["child_waits"] and f["std_pipes"]["1"]["parent_waits"]))
    pipes = facts["std_pipes"]
    assert pipes["0"]["child_waits"] == ["read"] and pipes["0"]["parent_ends"] == ["write"]
    assert pipes["1"]["parent_waits"] == ["read"] and pipes["1"]["child_waits"] == []
    assert pipes["2"]["child_waits"] == [] and pipes["2"]["parent_waits"] == []


def test_the_probe_reads_which_pipe_a_child_blocked_writing_is_on() -> None:
    facts = _pipes_of_family(FLOODS_STDERR, lambda f: bool(f["std_pipes"]["2"]["child_waits"]))
    pipes = facts["std_pipes"]
    assert pipes["2"]["child_waits"] == ["write"] and pipes["2"]["parent_ends"] == ["read"]
    assert pipes["1"]["child_waits"] == [] and pipes["1"]["parent_waits"] == ["read"]
