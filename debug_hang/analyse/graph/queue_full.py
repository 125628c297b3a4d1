"""A put into a full bounded queue.Queue whose every getter is itself blocked putting into it.

A thread in `Queue.put` with no timeout waits on the queue's `not_full` condition, which only a
`get()` / `get_nowait()` on that same Queue object notifies. Who can get is read from the job's
code: the functions that call `<expr>.get()` on the expression the blocked line puts into (the
probe's `setters` of the put line, read from the class's source; failing that, the loop of the
blocked frame's own function, its `context`). The threads of the process that run such a function
are the queue's getters. When each of them is idle in a put on that same Queue (the dump's facts
name it), with no timeout and at the same line in every sample, nothing can ever make room: the
getter waits for room only it could make (a consumer that re-queues a failed item into its own
full queue). The getter's put is the culprit; the producers blocked in put, and the calls queued
behind them that would only put too, are victims.

Not decided (left to the other readings) when a getter runs or sleeps (a slow consumer between
gets, a back-off), when no getter thread is found, when a queued call of the actor might get (a
method other than those seen blocked putting), or when another process of the job could still
call in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.events import _later_callers
from debug_hang.analyse.graph.inprocess import name_of, python_frames
from debug_hang.analyse.graph.model import QUEUED_STATES
from debug_hang.analyse.graph.queue_threads import StillThread, _same_in_every_sample, still_thread
from debug_hang.analyse.graph.threads import deciding_thread, frame_text, job_frame, other_threads_in_job_code
from debug_hang.analyse.patterns import is_library
from debug_hang.model import Frame, Thread

_QUEUE_FILE = re.compile(r"(^|/)queue\.py$")
_PUT_CALL = re.compile(r"(?P<recv>[\w.]+)\.put\(")
_CONTEXT_LINE = re.compile(r"^\s*(\d+)[:|]?\s(.*)$")


@dataclass
class FullQueue:
    """A full queue.Queue, what puts into it, and the functions of the job that get from it."""

    queue: str  # the Queue's identity (Queue@0x...)
    receiver: str  # the expression put into (`self.q`)
    getters: list[str]  # the functions that get from it (`WarehouseWriter._consume`)
    putters: list[StillThread]  # the threads blocked putting into it


def put_receiver(frame: Frame | None) -> str | None:
    """`self.q` for a job frame at `self.q.put(item)`."""
    match = _PUT_CALL.search(frame.code or "") if frame is not None else None
    return match.group("recv") if match else None


def getters_from_context(frame: Frame, receiver: str) -> list[str]:
    """The frame's own function, when the lines of it its context shows (up to the next `def`)
    get from `receiver`."""
    get = re.compile(rf"(?<![\w.]){re.escape(receiver)}\.get(_nowait)?\(")
    for line in frame.context or []:
        m = _CONTEXT_LINE.match(line)
        if m is None:
            continue
        number, code = int(m.group(1)), m.group(2)
        if number > (frame.line or 0) and re.match(r"\s*(async\s+)?def\s", code):
            break
        if get.search(code):
            return [frame.function]
    return []


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def full_queue(b: Builder, key: str, waiter: Thread) -> FullQueue | None:
    """The full queue `waiter` is blocked putting into, its getters (empty when the source shows
    none) and its blocked putters; None when the thread is not in such a put."""
    graph = b.thread_graphs.get(key)
    if graph is None:
        return None
    mine = still_thread(graph, waiter)
    receiver = put_receiver(mine.where) if mine is not None else None
    if mine is None or mine.op != "put" or receiver is None or mine.where is None:
        return None
    me = (mine.where.facts or {}).get("self")
    putters: list[StillThread] = []
    getters: list[str] = []
    for thread in other_threads_in_job_code(graph.verdict, None):
        s = still_thread(graph, thread)
        if s is None or s.op != "put" or s.obj != mine.obj or put_receiver(s.where) != receiver or s.where is None:
            continue
        if (s.where.facts or {}).get("self") != me:
            continue  # the same Queue reached through another object: not the same code
        putters.append(s)
        for entry in s.where.setters or []:
            name = entry.rsplit(":", 1)[0]
            if name not in getters:
                getters.append(name)
        getters.extend(g for g in getters_from_context(s.where, receiver) if g not in getters)
    if not putters:
        return None
    return FullQueue(mine.obj, receiver, getters, putters)


def _runs_getter(thread: Thread, getters: list[str]) -> Frame | None:
    """The thread's job frame whose function is one of `getters` (by qualified name)."""
    def same(function: str, getter: str) -> bool:
        return function == getter or getter.endswith("." + function) or function.endswith("." + getter)

    return next((f for f in python_frames(thread) if not is_library(f) and any(same(f.function, g) for g in getters)),
                None)


def releasing_calls(b: Builder, key: str, putting: set[str], getting: set[str]) -> list[str]:
    """The calls queued on the actor that might get from the queue: every queued method but those
    seen blocked putting into it (`putting`: a queued call of one of them reaches the same put
    first) - unless the source names it a getter (`getting`)."""
    node = b.g.nodes[key]
    if not node.actor_id:
        return []
    out = []
    for task in b.index.of_actor(node.actor_id):
        if task.state not in QUEUED_STATES or task.worker_pid:
            continue
        method = _short(str(task.name))
        if method in getting or method not in putting:
            out.append(str(task.name))
    return sorted(set(out))


def _in_queue_put(thread: Thread) -> bool:
    """The thread's innermost library frames are in queue.Queue's put (no facts needed)."""
    for frame in python_frames(thread):
        if not is_library(frame):
            return False
        if _QUEUE_FILE.search(frame.file) and "ray/util/" not in frame.file:
            return frame.function.rsplit(".", 1)[-1] == "put"
    return False


def same_put_methods(b: Builder, key: str, waiter: Thread) -> tuple[str, set[str], set[str]] | None:
    """(receiver, the actor's methods blocked at a put into it, its getters) when `waiter` is in a
    Queue.put at `self.X.put(...)` in a method of the actor's class. Read from the frames alone
    (no facts needed): in an actor, `self` of its class's methods is the actor, so a queued call of
    such a method reaches a put on that same queue."""
    node = b.g.nodes[key]
    frame = job_frame(waiter)
    receiver = put_receiver(frame)
    cls = node.class_name
    if not node.actor_id or not cls or frame is None or receiver is None or not receiver.startswith("self.") \
            or not _in_queue_put(waiter):
        return None
    putting: set[str] = set()
    getting: set[str] = set()
    for thread in other_threads_in_job_code(b.verdicts[key], None):
        at = job_frame(thread)
        if at is None or not _in_queue_put(thread) or put_receiver(at) != receiver \
                or not at.function.startswith(f"{cls}."):
            continue
        putting.add(_short(at.function))
        getting |= {_short(e.rsplit(":", 1)[0]) for e in at.setters or []}
        getting |= {_short(g) for g in getters_from_context(at, receiver)}
    return receiver, putting, getting


@graph_pass(after=("follow_edges", "detect_pool_self_wait", "detect_lock_waits"), decides=("queue-full-getter-puts",))
def detect_full_queue_getter_puts(b: Builder) -> None:
    """A put into a full queue.Queue whose every getter thread is blocked putting into it (queue-full-getter-puts)."""
    for key, verdict in b.verdicts.items():
        node = b.g.nodes[key]
        waiter = deciding_thread(verdict)
        if node.pattern not in (None, "event-wait") or b.g.out(key) or waiter is None:
            continue
        fq = full_queue(b, key, waiter)
        if fq is None or not fq.getters:
            continue
        graph = b.thread_graphs[key]
        threads = other_threads_in_job_code(verdict, None)
        getters = [(t, f) for t in threads if (f := _runs_getter(t, fq.getters)) is not None]
        blocked = {id(s.thread) for s in fq.putters}
        if not getters or any(id(t) not in blocked or not _same_in_every_sample(b, key, t) for t, _f in getters):
            continue  # a getter runs, sleeps or waits on something else: it may still make room
        if any(still_thread(graph, t) is None for t in threads if id(t) not in blocked):
            continue  # another thread of job code moves: it may still call a getter
        putting = {_short(s.where.function) for s in fq.putters if s.where is not None}
        if releasing_calls(b, key, putting, {_short(g) for g in fq.getters}) or _later_callers(b, key):
            continue
        _mark(b, key, fq, getters)


def _mark(b: Builder, key: str, fq: FullQueue, getters: list[tuple[Thread, Frame]]) -> None:
    node = b.g.nodes[key]
    thread, _f = getters[0]
    culprit = next(s for s in fq.putters if s.thread is thread)
    others = [s for s in fq.putters if all(s.thread is not t for t, _ in getters)]
    node.pattern, node.state = "queue-full-getter-puts", "blocked"
    names = ", ".join(sorted(set(fq.getters)))
    node.evidence.append(
        f"thread {name_of(thread)} waits in {fq.receiver}.put() on {fq.queue} (full) at {frame_text(culprit.where)}, "
        f"no timeout, the same line in every sample; the job's code gets from {fq.receiver} only in {names}, "
        f"and the thread(s) running it ({', '.join(name_of(t) for t, _ in getters)}) are this put: the only getter of "
        "the queue waits for room that only a get could make")
    if others:
        where = frame_text(others[0].where)
        node.evidence.append(f"{len(others)} other thread(s) wait to put into the same queue ({where}): victims, "
                             "released only once a getter takes an item")
    queued = [t for t in b.index.of_actor(node.actor_id) if t.state in QUEUED_STATES and not t.worker_pid] \
        if node.actor_id else []
    if queued:
        node.evidence.append(f"{len(queued)} call(s) queued on this actor ({', '.join(sorted({str(t.name) for t in queued}))}) "
                             f"run the same put: none of them gets from {fq.receiver}, so none can make room")
    node.frame = node.user_frame = culprit.where or job_frame(thread)
    b.deciding[key] = thread
