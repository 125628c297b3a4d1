"""Red-team round 6 misses, on real captures recorded live (tests/data/captures/README.md), each
with the variant where the answer must change.

A wait with a timeout returns by itself: `stop.wait(timeout=45)` is a ticker's sleep and
`q.get(timeout=40)` a flush timer, and a window of two samples a second apart cannot show that such
a wait never ends. Children that all wait for a multiprocessing lock no live process holds are
victims of a holder that ended, never children that never exit. Ranks in one rendezvous are in
one operation, not in different collectives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
TICKER = CAPTURES / "timed_event_wait_ticker_healthy"
FLUSHER = CAPTURES / "timed_queue_get_flusher_healthy"

Edit = Callable[[list[dict[str, Any]]], None]




def actor_main_threads(edit: Edit) -> Callable[[dict[str, Any]], None]:
    """An edit of the frames of every actor's main thread, in every sample."""
    def apply(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            for thread in proc["threads"]:
                if proc.get("actor_class") and thread.get("name") == "MainThread":
                    edit(thread["frames"])
    return apply


def untimed(frames: list[dict[str, Any]], inner_line: int, job_code: str, middle: tuple[int, str]) -> None:
    """The same wait without a timeout: Condition.wait's untimed branch, the job line without it."""
    frames[0].update(line=inner_line, code="waiter.acquire()")
    frames[1].update(line=middle[0], code=middle[1])
    frames[2].update(code=job_code)


def verdict_and_pattern(case: Path) -> tuple[str, str | None]:
    diag = reanalyse(case)
    return diag.verdict, (diag.causes[0].pattern if diag.causes else None)


def test_an_event_wait_with_a_timeout_is_not_a_hang_and_without_one_it_is(tmp_path: Path) -> None:
    # GIVEN an actor whose only job thread ticks in `stop_event.wait(timeout=period_s)` (healthy)
    assert verdict_and_pattern(TICKER) == ("inconclusive", "event-wait")
    # WHEN the same wait has no timeout, nothing of this process can set the event: a hang
    edited = capture_variant(tmp_path, TICKER, actor_main_threads(lambda f: untimed(f, 327, "if self.stop_event.wait():",
                                                          (629, "signaled = self._cond.wait(timeout)"))))
    assert verdict_and_pattern(edited) == ("hang", "event-never-set")


def test_a_queue_get_with_a_timeout_is_not_a_producer_gone_and_without_one_it_is(tmp_path: Path) -> None:
    # GIVEN a shipper whose only job thread waits in `events.get(timeout=period_s)` and flushes on each timeout
    assert verdict_and_pattern(FLUSHER) == ("inconclusive", "queue-get-wait")
    edited = capture_variant(tmp_path, FLUSHER, actor_main_threads(lambda f: untimed(f, 327, "self.batch.append(self.events.get())",
                                                           (171, "self.not_empty.wait()"))))
    assert verdict_and_pattern(edited) == ("hang", "producer-gone")


def test_the_timeout_is_read_from_the_job_line_when_the_library_source_is_not_shown(tmp_path: Path) -> None:
    # GIVEN the ticker's stack with the standard library's source lines unread (no code on its
    # frames): the job line's `timeout=` alone says that the wait returns by itself
    def no_library_source(frames: list[dict[str, Any]]) -> None:
        frames[0]["code"] = frames[1]["code"] = None
    assert verdict_and_pattern(capture_variant(tmp_path, TICKER, actor_main_threads(no_library_source))) == ("inconclusive", "event-wait")

    # and without it on the job line, nothing shows a timeout: the wait is read as never set
    def nor_a_timeout(frames: list[dict[str, Any]]) -> None:
        no_library_source(frames)
        frames[2]["code"] = "if self.stop_event.wait():"
    assert verdict_and_pattern(capture_variant(tmp_path / "untimed", TICKER, actor_main_threads(nor_a_timeout))) == ("hang", "event-never-set")


# ------------------------------------------------ a multiprocessing lock no live process holds

KILLED_READER = CAPTURES / "mp_queue_lock_of_a_killed_reader"
NO_LIVE_HOLDER = "no live process of the family holds it"


def test_children_that_all_wait_for_a_multiprocessing_lock_are_victims_not_children_that_never_exit() -> None:
    # GIVEN a pool whose reader was killed inside a multiprocessing.Queue's get: the two live
    # children wait at the queue's reader lock (a SemLock), the parent joins them
    diag = reanalyse(KILLED_READER)
    # THEN no child is named as a child that never exits: the lock's holder ended, unseen
    assert diag.verdict == "inconclusive" and diag.causes[0].pattern == "lock-wait"
    assert all(c.pattern != "child-process-hang" for c in diag.causes)
    children = [n for n in diag.graph.nodes.values() if n.pattern == "lock-wait"]
    assert len(children) == 2 and all(any(NO_LIVE_HOLDER in e for e in n.evidence) for n in children)


def test_a_child_reading_inside_the_lock_is_its_live_holder_and_the_rule_does_not_fire(tmp_path: Path) -> None:
    # GIVEN the same capture with one child inside the queue's read (past the lock: it holds it)
    def one_child_reads(doc: dict[str, Any]) -> None:
        reader = min(p["pid"] for p in doc["processes"] if p["role"] == "child")
        for proc in doc["processes"]:
            if proc["pid"] == reader:
                frames = proc["threads"][0]["frames"]
                frames[0].update(function="Connection._recv", file=frames[0]["file"].replace("synchronize.py", "connection.py"),
                                 line=395, code="chunk = read(handle, remaining)")
                frames[1].update(line=103, code="res = self._recv_bytes()")
    out = capture_variant(tmp_path, KILLED_READER, one_child_reads)
    diag = reanalyse(out)
    assert not any(NO_LIVE_HOLDER in e for n in diag.graph.nodes.values() for e in n.evidence)


# ------------------------------------------------ a rendezvous is one operation

RENDEZVOUS = CAPTURES / "rendezvous_for_a_rank_never_started"


def test_ranks_in_one_rendezvous_at_different_inner_frames_are_not_in_different_collectives() -> None:
    # GIVEN two ranks in init_process_group for a world of 3: rank 0 in the TCPStore it hosts
    # (_create_c10d_store), rank 1 already in _new_process_group_helper
    diag = reanalyse(RENDEZVOUS)
    # THEN neither is named as a rank in a different collective: one rendezvous, waiting for a
    # member that is not there (the launch that started too few: tests/test_rendezvous_cases.py)
    assert diag.causes[0].pattern == "rank-never-launched"
    assert all(n.pattern != "collective-mismatch" for n in diag.graph.nodes.values())


def test_a_rank_in_a_collective_while_its_peer_is_in_the_rendezvous_is_still_compared(tmp_path: Path) -> None:
    # GIVEN the same capture with one rank moved on into an all_reduce
    def one_rank_in_all_reduce(doc: dict[str, Any]) -> None:
        moved = min(p["pid"] for p in doc["processes"] if p.get("actor_class") == "EvalRank")
        for proc in doc["processes"]:
            for thread in proc["threads"]:
                if proc["pid"] == moved and thread.get("name") == "MainThread":
                    frames = thread["frames"]
                    torch = [i for i, f in enumerate(frames) if "torch/distributed/distributed_c10d" in f["file"]
                             or "torch/distributed/rendezvous" in f["file"]]
                    frames[:torch[-1] + 1] = [dict(frames[torch[-1]], function="all_reduce", line=2806, code="work.wait()")]
    out = capture_variant(tmp_path, RENDEZVOUS, one_rank_in_all_reduce)
    diag = reanalyse(out)
    assert any(n.pattern == "collective-mismatch" for n in diag.graph.nodes.values())
