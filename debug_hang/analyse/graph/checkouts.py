"""Pool checkouts: a thread waiting for a library's pool (a queue of free connections) to give it a
slot waits for a slot to be released by whoever holds one, not for a producer.

A library pool (urllib3's HTTPConnectionPool: a LifoQueue of connections, `_get_conn` gets one,
the response's release puts it back) is refilled only by the code holding a checked-out slot: a
thread of the same process inside the library's request (a request in flight returns its
connection when it ends), or job code releasing an object it kept (a streamed response). When no
other thread is inside that library and none runs job code, what holds the slots are objects only
the waiting thread's own code could release: the pool is exhausted for good.
"""

from __future__ import annotations

from debug_hang.analyse.graph.builder import Builder, follows
from debug_hang.analyse.graph.queues import check_in_process_producer
from debug_hang.analyse.graph.threads import (
    cannot_signal,
    deciding_thread,
    frame_text,
    job_frame,
    other_threads_in_job_code,
    timed_wait,
    timed_wait_text,
)
from debug_hang.analyse.patterns import is_library
from debug_hang.model import Frame, Thread


def _package(frame: Frame) -> str:
    """The installed package a library frame belongs to (`urllib3` for urllib3/connectionpool.py)."""
    return frame.short_file.split("/", 1)[0].removesuffix(".py")


def _in_package(thread: Thread, package: str, checkout: Frame) -> bool:
    """The thread runs code of the pool's package and is not itself waiting in the checkout."""
    frames = [f for f in thread.frames if not f.native]
    if any(f.function == checkout.function and f.file == checkout.file for f in frames):
        return False
    return any(is_library(f) and _package(f) == package for f in frames)


@follows("pool-holders", decides=("pool-exhausted",))
def follow_pool(b: Builder, key: str) -> None:
    """A pool checkout waits on the holders of the pool's slots: the threads of the process that
    are inside the pool's library or run job code that could release one. None: pool-exhausted."""
    verdict = b.verdicts[key]
    node = b.g.nodes[key]
    checkout = verdict.main.frame if verdict.main else None
    waiter = deciding_thread(verdict)
    if checkout is None or waiter is None:
        return
    if not is_library(checkout):
        # The job's own queue named a pool: its put-backs are the job's threads, read as a queue's.
        check_in_process_producer(node, verdict)
        return
    where = frame_text(checkout)
    if (timed := timed_wait(waiter)) is not None:
        node.evidence.append(timed_wait_text(where, timed))
        return
    package = _package(checkout)
    holders = [t for t, _ in verdict.threads if t is not waiter and _in_package(t, package, checkout)]
    if holders:
        names = ", ".join(f"{t.name or t.os_thread_id} at {frame_text(next(f for f in t.frames if not f.native))}"
                          for t in holders)
        node.evidence.append(
            f"waits in {package}'s pool checkout {where} for a slot to be returned; other thread(s) of this process are "
            f"inside {package} with a slot checked out ({names}): each returns it when its request ends — it waits on "
            "their work, not a hang by itself")
        return
    waited_at = verdict.main.user_frame if verdict.main else None
    releasers = [t for t in other_threads_in_job_code(verdict, waiter) if not cannot_signal(t, waited_at)]
    if releasers:
        names = ", ".join(f"{t.name or t.os_thread_id} at {frame_text(job_frame(t))}" for t in releasers)
        node.evidence.append(
            f"waits in {package}'s pool checkout {where}; threads of this process running job code may release "
            f"what holds its slots: {names}")
        return
    node.pattern, node.state = "pool-exhausted", "blocked"
    node.evidence.append(
        f"waits without a timeout in {package}'s pool checkout {where} for a slot (a connection) to be put back; "
        f"no other thread of this process is inside {package} (no request in flight that would return one) and "
        "none runs job code: every slot is held by an object of this process — a response checked out earlier and "
        "never read to the end or released — that only this thread's own code could release"
        + (f", before its call at {frame_text(waited_at)}" if waited_at is not None else ""))
