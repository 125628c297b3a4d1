"""Who can release a wait, decided from the objects waited on, on recorded real captures.

Each capture under tests/data/cases/ is a real run of its examples/ scenario, dumped with the
frames' facts (identities, ObjectRef ids, `with` blocks). Every test reads what decides the
mechanism, then changes one fact of the capture - the identity that ties two threads, an object
id, a thread's run-queue time, a queued call - and checks that the conclusion changes with it:
the rule reads the fact, not the scenario.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.analyse.analysis import analyse
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.model import Frame, Process, Thread
from debug_hang.pipeline import Capture, finish, load_capture

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"
CAPTURES = ROOT / "tests" / "data" / "captures"  # red-team jobs (not examples): captures/README.md


def _capture(name: str) -> Capture:
    case = CASES / name if (CASES / name).is_dir() else CAPTURES / name
    if not (case / "stacks.json").exists():
        pytest.skip(f"no recorded {name} capture")
    cap = load_capture(Path(case))
    if not any(f.facts for p in cap.collection.processes for t in p.threads for f in t.frames):
        pytest.skip(f"{name} was recorded without frame facts")
    return cap


def _run(cap: Capture) -> Diagnosis:
    diag = analyse(cap.job, cap.snapshot, cap.collection, cap.tasks_after, "", "", [], [], time.monotonic())
    finish(diag, cap.snapshot)
    return diag


def _diag(name: str, change: Callable[[Capture], None] | None = None) -> Diagnosis:
    cap = _capture(name)
    if change is not None:
        change(cap)
    return _run(cap)


def _last(cap: Capture, title: str) -> Process:
    """The last sample of the process whose title holds `title`."""
    found = [p for p in cap.collection.processes if title in (p.title or "")]
    assert found, f"no process titled {title}"
    return max(found, key=lambda p: p.sample)


def _frames(proc: Process, function: str) -> list[tuple[Thread, Frame]]:
    return [(t, f) for t in proc.threads for f in t.frames if f.function.endswith(function)]


def _top(diag: Diagnosis) -> tuple[str, list[str]]:
    cause = diag.causes[0]
    return str(cause.pattern), [str(c.class_name or c.name) for c in cause.culprits]


# ------------------------------------------------------------------ a thread pool waiting on itself
def test_every_worker_of_the_pool_waits_on_a_future_of_the_same_pool() -> None:
    diag = _diag("thread_pool_waits_on_itself")
    assert diag.verdict == "hang" and _top(diag) == ("executor-self-wait", ["ShardIndexer"])
    text = "\n".join(diag.causes[0].culprits[0].evidence)
    # The pool's threads are in the report: each worker, the Future it waits on, the line.
    assert text.count("ThreadPoolExecutor-0_") >= 2 and "Future@0x" in text and "index_shard" in text
    assert "work queue _queue.SimpleQueue@0x" in text


def test_a_worker_that_runs_is_what_the_pool_waits_for_not_a_self_wait() -> None:
    def one_worker_runs(cap: Capture) -> None:
        proc = _last(cap, "ShardIndexer")
        worker = next(t for t in proc.threads if str(t.name).startswith("ThreadPoolExecutor"))
        worker.active = True
        cap.collection.info[proc.ref]["threads"] = {str(worker.os_thread_id): {"cpu": 90.0, "runnable": 100.0}}

    diag = _diag("thread_pool_waits_on_itself", one_worker_runs)
    assert all(c.pattern != "executor-self-wait" for c in diag.causes)


def test_a_pool_with_a_free_worker_is_not_waiting_on_itself() -> None:
    def one_worker_free(cap: Capture) -> None:
        # As py-spy shows an idle worker: its stack from `_worker` out (waiting in C on work_queue.get).
        proc = _last(cap, "ShardIndexer")
        worker = next(t for t in proc.threads if str(t.name).startswith("ThreadPoolExecutor"))
        start = next(i for i, f in enumerate(worker.frames) if f.function.endswith("_worker"))
        worker.frames, worker.active = worker.frames[start:], False

    diag = _diag("thread_pool_waits_on_itself", one_worker_free)
    assert all(c.pattern != "executor-self-wait" for c in diag.causes)


def test_without_facts_the_pool_is_not_named() -> None:
    def no_locals(cap: Capture) -> None:
        for proc in cap.collection.processes:
            for thread in proc.threads:
                for frame in thread.frames:
                    frame.facts = None

    diag = _diag("thread_pool_waits_on_itself", no_locals)
    assert all(c.pattern != "executor-self-wait" for c in diag.causes)


# ------------------------------------------------------------------ an Event whose setter spins
def test_the_event_waits_for_the_thread_working_on_the_same_object_and_it_spins() -> None:
    diag = _diag("event_setter_spins")
    assert diag.verdict in ("hang", "inconclusive") and _top(diag) == ("busy-loop", ["VocabBuilder"])
    culprit = diag.causes[0].culprits[0]
    text = "\n".join(culprit.evidence)
    assert "merger could set it: it works on the same VocabBuilder" in text
    assert "_merge_loop" in text and "it spins" in text
    assert culprit.frame is not None and "_merge_loop" in culprit.frame.function


def test_a_thread_on_another_object_is_no_setter() -> None:
    def merger_elsewhere(cap: Capture) -> None:
        proc = _last(cap, "VocabBuilder")
        for thread in proc.threads:
            if thread.name == "merger":
                for frame in thread.frames:
                    if frame.facts and "self" in frame.facts:
                        frame.facts["self"] = "VocabBuilder@0x1"  # another instance

    diag = _diag("event_setter_spins", merger_elsewhere)
    assert all(c.pattern != "busy-loop" for c in diag.causes)


def test_a_setter_that_does_not_run_is_not_a_busy_loop() -> None:
    def merger_idle(cap: Capture) -> None:
        proc = _last(cap, "VocabBuilder")
        merger = next(t for t in proc.threads if t.name == "merger")
        cap.collection.info[proc.ref]["threads"] = {str(merger.os_thread_id): {"cpu": 0.0, "runnable": 1.0}}

    diag = _diag("event_setter_spins", merger_idle)
    assert all(c.pattern != "busy-loop" for c in diag.causes)


def test_the_calls_waiting_on_a_condition_are_tied_to_its_spinning_notifier() -> None:
    # The spinning thread decides the process (it waits on nothing): the act() threads that wait on
    # the Condition it would notify are named, and what ties them to it (the same RolloutPolicy).
    diag = _diag("notifier_spins_waiters_wait")
    assert diag.verdict == "hang" and _top(diag) == ("busy-loop", ["RolloutPolicy"])
    text = "\n".join(diag.causes[0].culprits[0].evidence)
    assert "thread weight-sync runs at RolloutPolicy._sync_weights" in text and "3 thread(s) of this process wait on it" in text
    assert text.count("waits in Condition.wait_for (condition Condition@0x") == 3
    assert text.count("→ weight-sync could set it: it works on the same RolloutPolicy") == 3


def test_waiters_on_another_object_are_not_tied_to_the_spinning_thread() -> None:
    def waiters_elsewhere(cap: Capture) -> None:
        proc = _last(cap, "RolloutPolicy")
        for thread in proc.threads:
            for frame in thread.frames if str(thread.name).startswith("Dummy") else []:
                if frame.facts and "self" in frame.facts and "RolloutPolicy" in str(frame.facts["self"]):
                    frame.facts["self"] = "RolloutPolicy@0x1"  # another instance

    diag = _diag("notifier_spins_waiters_wait", waiters_elsewhere)
    assert "wait on it" not in "\n".join(e for c in diag.causes for x in c.culprits for e in x.evidence)


# ------------------------------------------------------------------ async slots all awaiting
def test_every_async_slot_awaits_while_the_setter_is_queued() -> None:
    diag = _diag("async_slots_await_later_call")
    assert diag.verdict == "hang" and _top(diag) == ("event-setter-queued", ["GradAccumulator"])
    text = "\n".join(diag.causes[0].culprits[0].evidence)
    assert "coroutines suspended in await" in text and "GradAccumulator.push" in text
    assert "GradAccumulator.pull x2" in text


def test_with_no_call_queued_the_awaited_object_is_never_resolved() -> None:
    def push_never_made(cap: Capture) -> None:
        cap.snapshot.tasks = [t for t in cap.snapshot.tasks if not str(t.get("name")).endswith(".push")]
        cap.tasks_after = [t for t in cap.tasks_after or [] if not str(t.get("name")).endswith(".push")]

    diag = _diag("async_slots_await_later_call", push_never_made)
    assert _top(diag)[0] == "async-await-stuck"


# ------------------------------------------------------------------ ray.get by object id
def test_the_merger_waits_for_the_task_that_creates_its_object() -> None:
    diag = _diag("get_on_passed_ref")
    assert diag.verdict == "hang" and _top(diag) == ("poll-never-satisfied", ["load_shard"])
    edges = [e for e in diag.graph.edges if diag.graph.nodes[e.src].class_name == "Merger"]
    assert len(edges) == 1 and "the object id holds its task id" in edges[0].evidence
    assert all(diag.graph.nodes[c.key].task_name != "heartbeat" for cause in diag.causes for c in cause.culprits)


def _retarget(cap: Capture, task_name: str | None) -> None:
    """Make the Merger's ray.get wait on the object of another task (None: of no known task)."""
    proc = _last(cap, "Merger")
    target = next((t for t in cap.snapshot.tasks if t.get("name") == task_name), None)
    new = (str(target["task_id"]) if target else "ab" * 8 + "f" * 24 + "01000000") + "01000000"
    for _thread, frame in _frames(proc, "get_objects") + _frames(proc, "get"):
        for key in list(frame.facts or {}):
            if key.startswith("ids("):
                assert frame.facts is not None
                frame.facts[key] = new


def test_an_object_of_the_heartbeat_task_makes_it_the_culprit() -> None:
    diag = _diag("get_on_passed_ref", lambda cap: _retarget(cap, "heartbeat"))
    assert _top(diag) == ("poll-never-satisfied", ["heartbeat"])


def test_an_object_of_no_known_task_is_not_guessed() -> None:
    diag = _diag("get_on_passed_ref", lambda cap: _retarget(cap, None))
    merger = next(n for n in diag.graph.nodes.values() if n.class_name == "Merger")
    assert not diag.graph.out(merger.key)
    assert any("created by no task or actor the State API lists" in e for e in merger.evidence)


# ------------------------------------------------------------------ a lock held across a wait
def test_the_lock_holder_waits_on_the_future_the_lock_taker_holds() -> None:
    diag = _diag("lock_held_across_future_wait")
    assert diag.verdict == "hang" and _top(diag) == ("lock-order-deadlock", ["ModelCache"])
    text = "\n".join(diag.causes[0].culprits[0].evidence)
    assert "loader holds it" not in text  # the loader waits for the lock; MainThread holds it
    assert "holds it: inside the `with` block of ModelCache.refresh" in text
    assert "loader" in text and "holds the Future" in text


def test_a_lock_of_another_object_breaks_the_cycle() -> None:
    def loader_on_another_cache(cap: Capture) -> None:
        proc = _last(cap, "ModelCache")
        for thread in proc.threads:
            if thread.name == "loader":
                for frame in thread.frames:
                    if frame.facts and "self" in frame.facts:
                        frame.facts["self"] = "ModelCache@0x1"

    diag = _diag("lock_held_across_future_wait", loader_on_another_cache)
    assert all(c.pattern != "lock-order-deadlock" for c in diag.causes)
