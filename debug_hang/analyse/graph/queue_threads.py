"""A process whose every thread waits, through a queue.Queue, on another of its threads.

A queue.Queue, a threading Event/Condition/Semaphore/Barrier and a Thread.join are released
only by threads of the same process. When every thread of the process that could act - every
thread in job code, and every library thread whose wait leads somewhere - is idle in such a wait
with no timeout, seen at the same line in every sample, nothing inside the process can move; and
when no Ray call of it is unfinished (a callback could act), no call to it is queued and no other
process of the job is free to call in, nothing outside will either. Which wait to change depends
on what each waits for (read from the dump's facts: the Queue and Thread each frame works on):

- `Queue.join()` counts the items taken but not yet marked `task_done()`: its consumers, idle in
  `get()` on that same queue, could call task_done only after another item is put, and no thread
  can put: a get() without its task_done (a `continue` or exception path) - the consumer loop;
- a thread in `Thread.join()` of a thread blocked in `put()` on a full queue (or in `get()` on an
  empty one) that no other thread can drain (or fill): the joiner stopped doing its side of the
  queue and waits for a thread that needs it - the joiner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.events import _later_callers
from debug_hang.analyse.graph.inprocess import ThreadGraph, name_of, python_frames, runs
from debug_hang.analyse.graph.model import QUEUED_STATES
from debug_hang.analyse.graph.threads import (
    frame_text,
    job_frame,
    other_threads_in_job_code,
    pending_timers,
    waits_with_timeout,
)
from debug_hang.analyse.patterns import catalog, is_library
from debug_hang.facts import parse_identity
from debug_hang.model import Frame, Thread
from debug_hang.snapshot import DONE_STATES

_QUEUE_FILE = re.compile(r"(^|/)queue\.py$")
_QUEUE_OPS = {"get": "get", "put": "put", "join": "join"}
# Waits on objects only threads of this process can release (threading.py, queue.py), by the
# frame's kind in inprocess.wait_of; a Future may be completed by a Ray callback thread, a lock
# `with` line may be a multiprocessing lock: neither is counted.
_IN_PROCESS_KINDS = frozenset({"event", "condition", "semaphore", "barrier", "join"})
@dataclass
class StillThread:
    """One thread of the process, idle in a wait only the process's threads can release."""

    thread: Thread
    op: str  # "get", "put", "join" (a queue's), "joins", or the wait kind (event, condition...)
    obj: str  # the Queue, Thread or object waited on (an identity)
    where: Frame | None  # the job's innermost frame


def queue_op(thread: Thread) -> tuple[str, str, Frame] | None:
    """(op, Queue identity, frame) when the thread's innermost library frames wait in a
    queue.Queue's get/put/join (not ray.util.queue, not multiprocessing)."""
    for frame in python_frames(thread):
        if not is_library(frame):
            return None
        if _QUEUE_FILE.search(frame.file) and "ray/util/" not in frame.file:
            op = _QUEUE_OPS.get(frame.name)
            me = (frame.facts or {}).get("self")
            if op is None or not isinstance(me, str) or not parse_identity(me):
                return None
            return op, me, frame
    return None


def still_thread(graph: ThreadGraph, thread: Thread) -> StillThread | None:
    """The thread's wait, when it is idle in one only the process's threads can release."""
    if runs(thread, graph.info) or waits_with_timeout(thread):
        return None
    found = queue_op(thread)
    if found is not None:
        op, obj, _frame = found
        return StillThread(thread, op, obj, job_frame(thread))
    wait = graph.waits.get(id(thread))
    if wait is None or wait.kind not in _IN_PROCESS_KINDS or not wait.objects:
        return None
    return StillThread(thread, "joins" if wait.kind == "join" else wait.kind, wait.objects[0], wait.where)


def _thread_identity(thread: Thread) -> str | None:
    """The Thread object a thread runs (its `_bootstrap` frame's self)."""
    boot = next((f for f in reversed(python_frames(thread)) if f.function.endswith("_bootstrap")), None)
    value = (boot.facts or {}).get("self") if boot is not None else None
    return value if isinstance(value, str) else None


def _library_thread_may_act(graph: ThreadGraph, counted: list[Thread]) -> bool:
    """A thread left out of the count (a library thread idle on its own queue or event) that is
    no known housekeeping loop and runs, or waits with a timeout: it wakes on its own and may
    act (a stop flag checked every second, a periodic flush that puts)."""
    cat = catalog()
    for thread, match in graph.verdict.threads:
        if any(thread is t for t in counted):
            continue
        match = graph.matches.get(id(thread), match)
        if match.pattern != "unknown" and cat[match.pattern].kind == "benign":
            continue
        if runs(thread, graph.info) or waits_with_timeout(thread):
            return True
    return False


def _same_in_every_sample(b: Builder, key: str, thread: Thread) -> bool:
    """The thread (by its id) shows the same innermost frame and line in every sample (two at least)."""
    samples = b.inp.samples.get(b.g.nodes[key].ref, [])
    tid = thread.os_thread_id or thread.thread_id or thread.name
    wanted = next(iter(python_frames(thread)), None)
    if len(samples) < 2 or wanted is None:
        return False
    for proc in samples:
        mine = next((t for t in proc.threads if (t.os_thread_id or t.thread_id or t.name) == tid), None)
        at = next(iter(python_frames(mine)), None) if mine is not None else None
        if at is None or (at.function, at.line) != (wanted.function, wanted.line):
            return False
    return True


def standstill(b: Builder, key: str) -> list[StillThread] | None:
    """Every thread of the process that could act, when each is idle in a wait only the others
    could release, the same in every sample, with nothing outside the process able to act
    (no unfinished Ray call of it, no call to it queued, no timer, no other process free to call
    in); None otherwise."""
    graph = b.thread_graphs.get(key)
    if graph is None:
        return None
    verdict = graph.verdict
    if pending_timers(verdict, None):
        return None
    threads = other_threads_in_job_code(verdict, None)
    still = [s for t in threads if (s := still_thread(graph, t)) is not None]
    if len(still) < 2 or len(still) < len(threads) or not all(_same_in_every_sample(b, key, s.thread) for s in still):
        return None
    if _library_thread_may_act(graph, threads):
        return None
    joined = {ident for s in still if (ident := _thread_identity(s.thread))}
    if any(s.op == "joins" and s.obj not in joined for s in still):
        return None  # it joins a thread outside these: that one may end on its own
    node = b.g.nodes[key]
    if node.kind != "driver" and not b.running.get(key):
        return None  # an idle actor whose worker threads wait for work is idle, not stuck
    own = b.own_calls(key)
    if any(t.parent_task_id in own and t.state not in DONE_STATES for t in b.tasks):
        return None  # a call it made may still complete and run a callback here
    if node.actor_id and any(t.state in QUEUED_STATES for t in b.index.of_actor(node.actor_id)):
        return None  # a queued call is the event-setter-queued question
    if _later_callers(b, key):
        return None  # another process of the job may still call in
    return still


@graph_pass(after=("follow_edges", "detect_pool_self_wait", "detect_lock_waits"), decides=("queue-threads-standstill",))
def detect_queue_standstill(b: Builder) -> None:
    """Processes whose threads all wait on each other through a queue.Queue (queue-threads-standstill)."""
    for key in b.verdicts:
        node = b.g.nodes[key]
        if node.pattern not in (None, "event-wait", "queue-get-wait", "lock-wait") or b.g.out(key):
            continue
        still = standstill(b, key)
        if still is None or not any(s.op in _QUEUE_OPS for s in still):
            continue
        _mark(b, key, still)


def _mark(b: Builder, key: str, still: list[StillThread]) -> None:
    node = b.g.nodes[key]
    culprit, why = _culprit(still)
    node.pattern, node.state = "queue-threads-standstill", "blocked"
    for s in still:
        node.evidence.append(f"thread {name_of(s.thread)} waits in {_op_text(s)} at {frame_text(s.where)}")
    node.evidence.extend(why)
    node.evidence.append(
        "every thread of this process that could act waits like this, at the same line in every sample, with no "
        "timeout; no Ray call of it is unfinished, no call to it is queued, no timer is pending and no other process "
        "of the job is free to call in: a queue.Queue and a Thread.join are released only by threads of this "
        "process, so nothing will move")
    if culprit is not None and culprit.where is not None:
        node.frame = node.user_frame = culprit.where
        b.deciding[key] = culprit.thread


def _op_text(s: StillThread) -> str:
    what = s.obj.split("@")[0]
    texts = {"get": f"{what}.get() on {s.obj} (empty)", "put": f"{what}.put() on {s.obj} (full)",
             "join": f"{what}.join() on {s.obj} (items taken, not all marked task_done)",
             "joins": f"Thread.join() of {s.obj}"}
    return texts.get(s.op, f"a {s.op} wait on {s.obj}")


def _culprit(still: list[StillThread]) -> tuple[StillThread | None, list[str]]:
    """The thread whose code must change, and why: a joiner of a thread blocked on a queue the
    joiner was to drain or fill; else the consumers of a joined queue; else none named."""
    by_identity = {ident: s for s in still if (ident := _thread_identity(s.thread))}
    for s in still:
        joined = by_identity.get(s.obj) if s.op == "joins" else None
        if joined is None or joined.op not in ("put", "get"):
            continue
        side = "take from" if joined.op == "put" else "put into"
        others = [o for o in still if o is not s and o is not joined]
        return s, [
            f"thread {name_of(s.thread)} joins {name_of(joined.thread)}, which waits to {joined.op} on "
            f"{joined.obj}; the only thread(s) that could {side} it " + (
                f"({', '.join(name_of(o.thread) for o in others)}) wait too" if others else "are this joiner")
            + f": {name_of(s.thread)} stopped serving the queue and waits for a thread that needs it (drain the queue, "
            "or unblock the put/get, before joining)"]
    for s in still:
        if s.op != "join":
            continue
        consumers = [o for o in still if o.op == "get" and o.obj == s.obj]
        if not consumers:
            continue
        return consumers[0], [
            f"{s.obj} is joined while every consumer of it ({', '.join(name_of(o.thread) for o in consumers)}) is idle "
            "in get() on that same queue: the queue is empty, yet join() still counts an item taken and never marked "
            "task_done(); a consumer calls task_done only after its next get(), and no thread can put - a path "
            "of the consumer loop skipped task_done (a `continue`, an exception)" + _skip_hint(consumers[0].where)]
    return None, []


_CONTINUE = re.compile(r"^\s*(\d+)[:|]?\s.*\b(continue|return)\b")
_TASK_DONE = re.compile(r"^\s*(\d+)[:|]?\s.*\.task_done\(")


def _skip_hint(frame: Frame | None) -> str:
    """`: its loop has `continue` at line 36 before task_done() at line 38` when the frame's
    source context shows one."""
    lines = (frame.context or []) if frame is not None else []
    done = next((m for m in map(_TASK_DONE.match, lines) if m), None)
    skip = next((m for m in map(_CONTINUE.match, lines) if m and (done is None or int(m.group(1)) < int(done.group(1)))), None)
    if done is None or skip is None:
        return ""
    return f" (its loop has `{skip.group(2)}` at line {skip.group(1)}, before task_done() at line {done.group(1)})"
