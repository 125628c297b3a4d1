"""Queue waits inside one process, decided from the objects waited on, on recorded real captures.

Each capture under tests/data/captures/ is a live run of a red-team job (captures/README.md),
dumped with the frames' facts (the Queue each get/put/join frame works on, the Thread a join
waits for). Every test reads what decides the mechanism, then changes one fact of the capture -
a thread that runs, a timeout, a queued call, a line that moved - and checks that the conclusion
changes with it: the rule reads the fact, not the scenario.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.analyse.analysis import analyse
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.model import Process, Thread
from debug_hang.pipeline import Capture, finish, load_capture, reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
JOIN = "queue_join_consumers_idle"  # redteam/dedup_worker_queue.py
CLOSE = "join_producer_on_full_queue"  # redteam/prefetch_iterator_close.py
HEALTHY = "queue_join_live_downstream"  # redteam/healthy_queue_trickle_join.py


def _capture(name: str) -> Capture:
    case = CAPTURES / name
    if not (case / "stacks.json").exists():
        pytest.skip(f"no recorded {name} capture")
    return load_capture(Path(case))


def _diag(name: str, change: Callable[[Capture], None] | None = None) -> Diagnosis:
    cap = _capture(name)
    if change is not None:
        change(cap)
    diag = analyse(cap.job, cap.snapshot, cap.collection, cap.tasks_after, "", "", [], [], time.monotonic())
    finish(diag, cap.snapshot)
    return diag


def _samples(cap: Capture, title: str) -> list[Process]:
    found = [p for p in cap.collection.processes if title in (p.title or "")]
    assert found, f"no process titled {title}"
    return found


def _last(cap: Capture, title: str) -> Process:
    return max(_samples(cap, title), key=lambda p: p.sample)


def _thread(proc: Process, name_part: str) -> Thread:
    return next(t for t in proc.threads if name_part in str(t.name))


def _top(diag: Diagnosis) -> tuple[str, list[str]]:
    cause = diag.causes[0]
    return str(cause.pattern), [str(c.class_name or c.name) for c in cause.culprits]


def _evidence(diag: Diagnosis) -> str:
    return "\n".join(line for c in diag.causes for x in c.culprits for line in x.evidence)


def _run_thread(cap: Capture, title: str, name_part: str) -> None:
    """The thread runs: py-spy saw it active and the node saw it on a CPU all the window."""
    proc = _last(cap, title)
    thread = _thread(proc, name_part)
    thread.active = True
    info = cap.collection.info.setdefault(proc.ref, {})
    info.setdefault("threads", {})[str(thread.os_thread_id)] = {"runnable": 100.0, "cpu": 100.0}


# ------------------------------------------------------------------ Queue.join, consumers idle in get
def test_a_join_whose_consumers_all_wait_in_get_on_the_same_queue_is_a_hang_in_the_consumer_loop() -> None:
    diag = _diag(JOIN)
    assert diag.verdict == "hang" and _top(diag) == ("queue-threads-standstill", ["Deduper"])
    culprit = diag.causes[0].culprits[0]
    # The line to change is the consumer's loop, not the join: its path without task_done.
    assert culprit.user_frame is not None and culprit.user_frame.function.endswith("_consume")
    text = _evidence(diag)
    assert "idle in get() on that same queue" in text and "`continue` at line 36, before task_done() at line 38" in text


def test_the_saved_folder_of_the_join_case_re_analyses_to_the_same() -> None:
    diag = reanalyse(CAPTURES / JOIN)
    assert diag.verdict == "hang" and _top(diag)[0] == "queue-threads-standstill"


def test_a_consumer_that_runs_may_still_call_task_done() -> None:
    diag = _diag(JOIN, lambda cap: _run_thread(cap, "Deduper", "Thread-1"))
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes) and diag.verdict != "hang"


def test_a_consumer_waiting_with_a_timeout_wakes_on_its_own() -> None:
    def timed(cap: Capture) -> None:
        thread = _thread(_last(cap, "Deduper"), "Thread-2")
        get = next(f for f in thread.frames if f.function.endswith("Queue.get"))
        get.facts = {**(get.facts or {}), "timeout": 1}
    diag = _diag(JOIN, timed)
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes) and diag.verdict != "hang"


def test_a_consumer_seen_elsewhere_in_an_earlier_sample_moved() -> None:
    def moved(cap: Capture) -> None:
        first = min(_samples(cap, "Deduper"), key=lambda p: p.sample)
        thread = _thread(first, "Thread-1")
        thread.frames = [dataclasses.replace(thread.frames[0], line=(thread.frames[0].line or 0) + 2), *thread.frames[1:]]
    diag = _diag(JOIN, moved)
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes)


def test_idle_worker_threads_of_an_actor_with_no_call_running_are_idle_not_stuck() -> None:
    def finished(cap: Capture) -> None:
        for rows in (cap.snapshot.tasks, cap.tasks_after or []):
            for row in rows:
                if str(row.get("name")) == "Deduper.ingest":
                    row["state"] = "FINISHED"
    diag = _diag(JOIN, finished)
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes)


def test_a_join_whose_consumers_wait_on_another_queue_names_no_consumer_loop() -> None:
    def other_queue(cap: Capture) -> None:
        for name in ("Thread-1", "Thread-2"):
            thread = _thread(_last(cap, "Deduper"), name)
            get = next(f for f in thread.frames if f.function.endswith("Queue.get"))
            get.facts = {**(get.facts or {}), "self": "Queue@0x1111"}
    diag = _diag(JOIN, other_queue)
    # Still nothing can move, but no consumer of the joined queue is seen: no loop is blamed.
    assert _top(diag)[0] == "queue-threads-standstill"
    assert "idle in get() on that same queue" not in _evidence(diag)


# ------------------------------------------------------------------ Thread.join of a producer on a full queue
def test_a_joiner_of_a_producer_blocked_on_the_queue_only_it_drained_is_the_culprit() -> None:
    diag = _diag(CLOSE)
    assert diag.verdict == "hang" and _top(diag) == ("queue-threads-standstill", ["SampleReader"])
    culprit = diag.causes[0].culprits[0]
    assert culprit.user_frame is not None and culprit.user_frame.function.endswith("close")
    assert "stopped serving the queue" in _evidence(diag)


def test_a_join_with_a_timeout_is_no_standstill() -> None:
    def timed(cap: Capture) -> None:
        thread = _thread(_last(cap, "SampleReader"), "MainThread")
        join = next(f for f in thread.frames if f.function.endswith("Thread.join"))
        join.facts = {**(join.facts or {}), "timeout": 5}
    diag = _diag(CLOSE, timed)
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes) and diag.verdict != "hang"


def test_a_producer_seen_elsewhere_in_an_earlier_sample_is_no_standstill() -> None:
    def moved(cap: Capture) -> None:
        first = min(_samples(cap, "SampleReader"), key=lambda p: p.sample)
        thread = _thread(first, "_fill")
        thread.frames = [dataclasses.replace(f, line=(f.line or 0) + 1) if f.function.endswith("_fill") else f
                         for f in thread.frames]
        thread.frames = thread.frames[2:]  # between two puts: in its own loop, not in Queue.put
    diag = _diag(CLOSE, moved)
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes)


def test_a_join_of_a_thread_outside_the_waits_may_end() -> None:
    def other_thread(cap: Capture) -> None:
        thread = _thread(_last(cap, "SampleReader"), "MainThread")
        for frame in thread.frames:
            if frame.function.endswith(("Thread.join", "_wait_for_tstate_lock")) and frame.facts:
                frame.facts = {**frame.facts, "self": "Thread@0x2222"}
    diag = _diag(CLOSE, other_thread)
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes)


def test_a_call_queued_on_the_actor_is_left_to_the_queued_call_rules() -> None:
    def queued(cap: Capture) -> None:
        head = next(t for t in cap.snapshot.tasks if str(t.get("name")) == "SampleReader.head")
        cap.snapshot.tasks.append({**head, "task_id": "ff" * 14, "state": "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY",
                                   "name": "SampleReader.head", "worker_pid": None, "start_time_ms": None})
    diag = _diag(CLOSE, queued)
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes)


# ------------------------------------------------------------------ the healthy counterfactual (live)
def test_a_join_with_a_live_downstream_stage_that_marks_items_done_is_no_hang() -> None:
    # A real healthy job: the parsers idle in get() on the joined queue, the joiner in join(), and a
    # writer thread alive in time.sleep that calls task_done after each upload.
    diag = _diag(HEALTHY)
    assert diag.verdict != "hang"
    assert all(c.pattern != "queue-threads-standstill" for c in diag.causes)


# ------------------------------------------------------------------ a lock a multiprocessing manager serves
MANAGER = "manager_lock_dead_client"  # redteam/shared_quota_broker.py


def test_a_proxy_call_is_a_call_into_the_manager_not_an_empty_queue() -> None:
    diag = _diag(MANAGER)
    readings = {str(v.process.task_name or v.process.actor_class): v.pattern for v in diag.verdicts}
    assert readings["allocate"] == "manager-call-wait" and readings["QuotaBroker"] == "manager-served-wait"
    # Each allocate's socket read is followed to the broker, its one TCP peer no Ray call explains.
    edges = [(diag.graph.nodes[e.src].name, diag.graph.nodes[e.dst].name) for e in diag.graph.edges]
    assert edges.count(("allocate", "QuotaBroker")) == 2


def test_a_served_lock_every_live_client_waits_for_is_held_by_the_client_that_died() -> None:
    diag = _diag(MANAGER)
    assert diag.verdict == "hang" and _top(diag) == ("native-wait-holder-died", ["calibrate"])
    assert "serves a client's call to a lock it serves" in "\n".join(
        line for n in diag.graph.nodes.values() for line in n.evidence)


def _proc_of(cap: Capture, title: str) -> list[Process]:
    return [p for p in cap.collection.processes if (p.title or "").startswith(title)]


def test_a_client_free_of_its_proxy_call_may_hold_the_lock() -> None:
    def one_client_works(cap: Capture) -> None:
        client = max(_proc_of(cap, "ray::allocate"), key=lambda p: (p.pid or 0, p.sample))
        for proc in (p for p in cap.collection.processes if p.pid == client.pid):
            main = _thread(proc, "MainThread")
            outer = [f for f in main.frames if not f.file.endswith(("connection.py", "managers.py"))]
            # Past its acquire: in the job's code (holding the lock, for all anyone can tell).
            main.frames = [dataclasses.replace(outer[0], line=(outer[0].line or 0) + 1, code="return job", facts={}),
                           *outer[1:]]
    diag = _diag(MANAGER, one_client_works)
    assert all(c.pattern != "native-wait-holder-died" for c in diag.causes) and diag.verdict != "hang"


def _no_peers(cap: Capture) -> None:
    for info in cap.collection.info.values():
        info.pop("socket_peers", None)


def test_no_client_seen_on_the_managers_connections_leaves_its_handler_threads_to_tell() -> None:
    # No TCP peer read (a unix-socket manager, or the scan failed): the manager's handler threads,
    # one per client connection, all inside the served acquire: no connected client is free to
    # hold the lock, and the client that died is still its likely holder.
    diag = _diag(MANAGER, _no_peers)
    assert diag.verdict == "hang" and _top(diag) == ("native-wait-holder-died", ["calibrate"])


def test_no_client_seen_and_a_handler_idle_at_recv_names_no_holder() -> None:
    def idle_handler(cap: Capture) -> None:
        _no_peers(cap)
        for proc in _proc_of(cap, "ray::QuotaBroker"):
            served = [t for t in proc.threads if t.frames and t.frames[0].function.endswith("serve_client")]
            if served:  # one connection's handler back at `request = recv()`: a live client, free
                t = served[0]
                t.frames = [dataclasses.replace(t.frames[0], function="Connection._recv", code="chunk = read(handle, remaining)",
                                                file=t.frames[0].file.replace("managers.py", "connection.py"), facts={}),
                            dataclasses.replace(t.frames[0], code="request = recv()", facts={}), *t.frames[1:]]
    diag = _diag(MANAGER, idle_handler)
    assert all(c.pattern != "native-wait-holder-died" for c in diag.causes) and diag.verdict != "hang"


def test_a_served_queue_is_fed_by_its_clients_not_held_by_a_dead_one() -> None:
    def serves_a_queue(cap: Capture) -> None:
        for proc in _proc_of(cap, "ray::QuotaBroker"):
            for thread in proc.threads:
                for frame in thread.frames:
                    if frame.function.endswith("serve_client") and frame.facts:
                        frame.facts = {**frame.facts, "obj": "Queue@0x7f00"}
    diag = _diag(MANAGER, serves_a_queue)
    assert all(c.pattern != "native-wait-holder-died" for c in diag.causes) and diag.verdict != "hang"


# ------------------------------------------------------------------ a paced writer standing for its process
PACED = "paced_writer_stands_for_joiner"  # redteam/healthy_queue_paced_writer.py


def test_a_sleeping_thread_standing_for_its_process_is_read_across_its_samples() -> None:
    diag = _diag(PACED)
    work = [w for w in diag.busy if w.sleeping]
    assert work and work[0].function.endswith("_write") and work[0].loop is not None


def test_a_loop_with_no_test_that_takes_work_every_round_is_no_poll_hang() -> None:
    # `while True: out.get(); time.sleep(0.5); ...; q.task_done()`: paced work fed by a queue, not a
    # poll of a condition; a one-second window cannot show it move, so no hang.
    diag = _diag(PACED)
    assert diag.verdict == "inconclusive" and "A hang needs a poll whose condition nothing changes" in diag.summary
