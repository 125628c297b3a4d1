"""Red-team round 7 misses, on real captures recorded live (tests/data/captures/README.md), each
with the variant where the answer must change.

An actor call whose loop has no exit holds the actor for good: calls queued behind it never start,
however alive the loop looks. A thread pool whose every worker waits on an in-process object only
a job queued in the same pool could release waits on itself, through a queue as through a Future.
A blocking send and the matching recv with different tags never pair. An async actor whose
concurrency slots free up (a call ended while the others awaited) is not stuck on itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
ENDLESS = CAPTURES / "endless_call_holds_actor_queue"
POOL = CAPTURES / "pool_consumers_before_producer"
TAGS = CAPTURES / "p2p_send_recv_tags_differ"
QUOTA = CAPTURES / "async_slots_turn_over_healthy"

Frames = list[dict[str, Any]]


def frames_of(pid_class: str, edit: Callable[[Frames], None], thread: str | None = None) -> Callable[[dict[str, Any]], None]:
    """An edit of the frames of the threads (one named, or all) of every sample of an actor class."""
    def apply(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            if proc.get("actor_class") != pid_class:
                continue
            for t in proc["threads"]:
                if thread is None or str(t.get("name") or "").startswith(thread):
                    edit(t["frames"])
    return apply


def culprits(diag: Any) -> list[tuple[str, list[str]]]:
    return [(c.pattern, [n.name for n in c.culprits]) for c in diag.causes]


def test_an_endless_method_holds_the_actor_the_queued_call_waits_on() -> None:
    # GIVEN MetricsLogger.flush_forever (`while True:` around a sleep and a write, no break),
    # RUNNING on a default actor, and MetricsLogger.log queued behind it, waited on by a rank
    diag = reanalyse(ENDLESS)
    # THEN the job is hung on the logger, by that mechanism, its loop's rounds no progress
    assert diag.verdict == "hang"
    assert culprits(diag)[0] == ("endless-call-holds-actor", ["MetricsLogger"])
    assert any("has no break, return or raise" in e for e in diag.causes[0].evidence)


def test_a_loop_that_can_break_is_not_endless(tmp_path: Path) -> None:
    # GIVEN the same capture, the loop's header testing a stop flag (`while not self.stopped:`)
    def stoppable(frames: Frames) -> None:
        for f in frames:
            if f.get("function", "").endswith("flush_forever") and f.get("context"):
                f["context"] = [line.replace("while True:", "while not self.stopped:") for line in f["context"]]
    diag = reanalyse(capture_variant(tmp_path, ENDLESS, frames_of("MetricsLogger", stoppable)))
    # THEN the call may return: not an endless call (whatever else its poll is read as)
    assert all(p != "endless-call-holds-actor" for p, _ in culprits(diag))
    assert culprits(diag)[0][1] == ["MetricsLogger"]


def test_pool_workers_waiting_on_a_queue_only_a_queued_job_fills() -> None:
    # GIVEN ShardMerger's 3-worker ThreadPoolExecutor, every worker in `q.get()` of one queue,
    # the producer job submitted after them, merge() waiting on all the Futures
    diag = reanalyse(POOL)
    assert diag.verdict == "hang"
    assert culprits(diag)[0] == ("executor-self-wait", ["ShardMerger"])


def test_a_pool_worker_waiting_with_a_timeout_is_no_self_wait(tmp_path: Path) -> None:
    # GIVEN the same capture, one worker's queue.get with a timeout (it returns by itself)
    def timed(frames: Frames) -> None:
        for f in frames:
            if f.get("function") == "Queue.get" and f.get("facts"):
                f["facts"]["timeout"] = 30.0
            if f.get("function", "").endswith("_write"):
                f["code"] = "rec = q.get(timeout=30)"
    diag = reanalyse(capture_variant(tmp_path, POOL, frames_of("ShardMerger", timed, thread="merge_0")))
    assert all(p != "executor-self-wait" for p, _ in culprits(diag))


def test_send_and_recv_with_different_tags_never_pair() -> None:
    # GIVEN rank 0 in send(dst=1, tag=0) and rank 1 in recv(src=0, tag=100), both idle
    diag = reanalyse(TAGS)
    assert diag.verdict == "hang"
    pattern, names = culprits(diag)[0]
    assert pattern == "collective-mismatch" and sorted(names) == ["Stage", "Stage"]
    assert any("with tag" in e for e in diag.causes[0].evidence)


def test_send_and_recv_with_the_same_tag_are_a_transfer(tmp_path: Path) -> None:
    # GIVEN the same capture, the receiver's tag equal to the sender's
    def same_tag(frames: Frames) -> None:
        for f in frames:
            if f.get("function") == "recv" and f.get("facts"):
                f["facts"]["tag"] = 0
    diag = reanalyse(capture_variant(tmp_path, TAGS, frames_of("Stage", same_tag)))
    assert all(p != "collective-mismatch" for p, _ in culprits(diag))
    assert diag.verdict != "hang"


def test_async_slots_that_turn_over_are_not_stuck() -> None:
    # GIVEN an async actor's 4 slots awaiting a rate limiter's tokens, 5 calls queued, and one
    # call that ended while the others awaited (the limiter refills every 20 s)
    diag = reanalyse(QUOTA)
    # THEN no false hang: its slots free up
    assert diag.verdict != "hang"
    assert all(p != "event-setter-queued" for p, _ in culprits(diag))


def test_async_slots_held_for_good_are_still_event_setter_queued(tmp_path: Path) -> None:
    # GIVEN the same capture with no call ended while the four awaited (the finished one ended
    # before they started) and no timer on the actor's event loop
    def no_timer(doc: dict[str, Any]) -> None:
        frames_of("LabelingClient", _no_loop_timer)(doc)
        for info in doc["meta"]["info"]:
            info.pop("loop_syscalls", None)

    def ended_before(tasks: list[dict[str, Any]]) -> None:
        label = [t for t in tasks if t.get("name") == "LabelingClient.label"]
        first = min(t["start_time_ms"] for t in label if t.get("state") == "RUNNING")
        for t in label:
            if t.get("state") == "FINISHED":
                t["start_time_ms"], t["end_time_ms"] = first - 2000, first - 1000
    diag = reanalyse(capture_variant(tmp_path, QUOTA, stacks=no_timer, tasks=ended_before))
    # THEN every slot is held by a call awaiting what only a queued call could do
    assert culprits(diag)[0] == ("event-setter-queued", ["LabelingClient"])


def _no_loop_timer(frames: Frames) -> None:
    for f in frames:
        if f.get("function") == "BaseEventLoop._run_once" and f.get("facts"):
            f["facts"]["timeout"] = "None"


OCR = CAPTURES / "pool_children_exit_and_respawn"


def test_children_that_exit_during_the_window_are_not_children_that_never_exit() -> None:
    # GIVEN a multiprocessing.Pool whose initializer raises in every worker: the children the
    # parent waits on are alive at the first reading and gone at the last, replaced by others
    diag = reanalyse(OCR)
    # THEN no child is named as a culprit that never exits; the parent is where to look
    assert all(p != "child-process-hang" for p, _ in culprits(diag))
    assert diag.verdict != "hang"
    assert culprits(diag)[0][1] == ["OcrEval"]


def test_children_alive_throughout_are_still_followed(tmp_path: Path) -> None:
    # GIVEN the same capture with its children alive at both readings
    out = capture_variant(tmp_path, OCR, lambda doc: None)
    stacks = json.loads((out / "stacks.json").read_text())
    for info in stacks["meta"]["info"]:
        if info.get("child_of") is not None:
            info["run_state"] = ["S", "S"]
    (out / "stacks.json").write_text(json.dumps(stacks))
    # THEN the parent's wait leads to them, as to children that do not exit
    assert any(p == "child-process-hang" for p, _ in culprits(reanalyse(out)))


BATCH = CAPTURES / "serve_partial_batch_waits_window_healthy"


def test_a_partial_serve_batch_waits_out_its_window() -> None:
    # GIVEN a @serve.batch(max_batch_size=32, batch_wait_timeout_s=90) replica admitting 5
    # requests (Serve's own warning in its log), 4 in flight, none finished yet
    diag = reanalyse(BATCH)
    # THEN no false hang: the batch runs when its window ends
    assert diag.verdict != "hang"
    assert culprits(diag)[0][0] == "serve-requests-in-flight"


def test_without_the_batch_warning_the_quiet_replica_is_stuck(tmp_path: Path) -> None:
    # GIVEN the same capture with Serve's batching warning gone from every log read
    def drop_warning(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            for log in (info.get("progress") or {}).get("logs") or []:
                for part in ("tail", "new"):
                    log[part] = [x for x in log.get(part) or [] if "max_batch_size" not in str(x)]
    diag = reanalyse(capture_variant(tmp_path, BATCH, drop_warning))
    assert culprits(diag)[0][0] == "serve-replica-stuck"


def test_the_endless_loop_one_call_deeper_holds_the_actor_too(tmp_path: Path) -> None:
    # GIVEN the same capture with the loop moved into a helper the method calls
    # (`flush_forever` runs `self._flush_rounds()`, whose `while True:` has no exit)
    def deeper(frames: Frames) -> None:
        at = next((i for i, f in enumerate(frames) if f.get("function", "").endswith("flush_forever")), None)
        if at is None:
            return
        inner = dict(frames[at], function="MetricsLogger._flush_rounds")
        frames[at] = dict(frames[at], line=30, code="self._flush_rounds()",
                          context=["29:     def flush_forever(self) -> None:", "30:         self._flush_rounds()",
                                   "31: "])
        frames.insert(at, inner)
    diag = reanalyse(capture_variant(tmp_path, ENDLESS, frames_of("MetricsLogger", deeper)))
    assert culprits(diag)[0] == ("endless-call-holds-actor", ["MetricsLogger"])
