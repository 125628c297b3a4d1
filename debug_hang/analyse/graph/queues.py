"""Queue waits: an in-process queue.Queue is filled by threads of the same process; a
ray.util.queue by other actors, read from their state."""

from __future__ import annotations

import re

from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, follows
from debug_hang.analyse.graph.locks import lock_holder_node
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.raycalls import follow_submitted
from debug_hang.analyse.graph.threads import (
    cannot_signal,
    deciding_thread,
    frame_text,
    job_frame,
    joins,
    other_threads_in_job_code,
    pending_timers,
    timed_wait,
    timed_wait_text,
)
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import ProcessVerdict
from debug_hang.model import Frame, ProcessRef, Thread
from debug_hang.rows import ActorRow, TaskRow
from debug_hang.snapshot import DONE_STATES, DRIVER_TASK_PREFIX, QUEUE_ACTOR_CLASS


@follows("queue-producers", decides=("producer-gone", "consumer-gone", "idle-no-work"))
def follow_queue(b: Builder, key: str) -> None:
    """A queue wait: an in-process queue.Queue is filled by threads of this process; a
    ray.util.queue by other actors."""
    if key in b.pipe_reads:
        _follow_pipe(b, key)
    elif _in_process_queue(b.verdicts[key]):
        check_in_process_producer(b.g.nodes[key], b.verdicts[key], running=b.running.get(key, []))
        feeders = [t for t, m in b.verdicts[key].threads if m.pattern == "ray-get-wait"]
        if b.g.nodes[key].pattern == "queue-get-wait" and feeders:
            # The threads that fill this queue may be waiting on Ray work themselves (a
            # streaming executor, a prefetcher in ray.wait): the calls this process submitted.
            follow_submitted(b, key)
            if b.g.out(key):
                names = ", ".join(str(t.name or t.os_thread_id) for t in feeders)
                b.g.nodes[key].evidence.append(
                    f"its queue.Queue is filled by threads of this process that wait in ray.get/ray.wait ({names}): "
                    "it waits for the calls they submitted")
    else:
        _edges_queue(b, key)


def _edges_queue(b: Builder, key: str) -> None:
    """A consumer of a ray.util.queue waits on the actors that should fill it. The State API does
    not say who holds the queue: the producers are read from evidence, strongest first: actors
    that died or whose task failed (then went idle); failing those, idle actors that have never
    run a single method (the producing call was never made)."""
    g, tasks = b.g, b.tasks
    me = g.nodes[key]
    if me.class_name == QUEUE_ACTOR_CLASS and _edges_to_the_other_side(b, key):
        return
    if me.class_name != QUEUE_ACTOR_CLASS and _edge_to_own_queue(b, key):
        return
    # A put blocked on the queue actor: the queue is full and the wait is on its consumers.
    full = me.class_name == QUEUE_ACTOR_CLASS and any(
        t.actor_id == me.actor_id and t.state == "RUNNING" and str(t.name).endswith(".put")
        for t in tasks)
    role: PatternId
    role, text = (("consumer-gone", "waits to put into a full queue this actor should drain") if full
                  else ("producer-gone", "waits on a queue this actor should fill"))
    failed = {t.actor_id for t in tasks if t.state == "FAILED" and t.actor_id}
    called = {t.actor_id for t in tasks if t.type == "ACTOR_TASK" and t.actor_id}
    candidates: list[tuple[str, ActorRow]] = []
    for actor_id, actor in b.actors.items():
        if actor_id == me.actor_id or actor.class_name == QUEUE_ACTOR_CLASS:
            continue
        node_key = b.actor_node.get(actor_id)
        if node_key is not None:
            candidates.append((node_key, actor))
    found = False
    for node_key, actor in candidates:
        node = g.nodes[node_key]
        if node.state == "dead" or (actor.actor_id in failed and node.state == "idle"):
            node.pattern = role
            g.add_edge(key, node_key, "queue-get-wait", text)
            found = True
    if found:
        return
    for node_key, actor in candidates:
        node = g.nodes[node_key]
        if node.state != "idle" or actor.actor_id in called:
            continue
        node.pattern = "idle-no-work"
        note = "idle and has never run a method (only its creation task): the call that should make it produce was never made"
        if note not in node.evidence:
            node.evidence.append(note)
        g.add_edge(key, node_key, "queue-get-wait",
                   "waits on a queue; no producer failed or died, and this actor has never been called")


# Queues that only threads (or coroutines) of the same process can fill.
_IN_PROCESS_QUEUE = re.compile(r"(^|/)(queue|asyncio/queues)\.py$")


def _in_process_queue(verdict: ProcessVerdict) -> bool:
    frame = verdict.main.frame if verdict.main else None
    return frame is not None and bool(_IN_PROCESS_QUEUE.search(frame.file)) and "ray/util/" not in frame.file


def _follow_pipe(b: Builder, key: str) -> None:
    """A read of an empty pipe waits for the processes that hold its write end (the probe's
    scan of the node's descriptors): an edge to each other one; when the reader's own process
    holds the only write end, its producers are threads of that process, as for a queue.Queue."""
    node, verdict = b.g.nodes[key], b.verdicts[key]
    thread, read = b.pipe_reads[key]
    pipe = f"pipe:[{read.get('inode')}] (fd {read.get('fd')})"
    writers = read.get("writers")
    if not isinstance(writers, list):
        node.evidence.append(f"who holds the write end of {pipe} could not be read (not every process of the node was readable)")
        return
    own = verdict.process.pid
    others = [pid for pid in writers if isinstance(pid, int) and pid != own]
    for pid in others:
        dst = b.by_pid.get(ProcessRef(node.node_id, pid)) or lock_holder_node(b.g, node.node_id, {"pid": pid},
                                                                               holds=f"the write end of {pipe}")
        b.g.add_edge(key, dst, "queue-get-wait", f"reads {pipe}, whose write end pid {pid} holds (/proc/PID/fd)")
    if others or own not in writers:
        return
    check_in_process_producer(node, verdict, consumer=thread,
                              what=f"the pipe {pipe}, whose only write end on the node this process holds,")


def check_in_process_producer(node: GNode, verdict: ProcessVerdict, consumer: Thread | None = None,
                              what: str = "a queue.Queue", running: list[TaskRow] | None = None) -> None:
    """A wait on a queue.Queue (or a pipe only this process writes): its producers can only be
    threads of this very process. When no other thread runs any job code, the producer thread is
    gone (it returned or died; Python printed its traceback, if any, to this worker's stderr): the
    consumer can never be fed."""
    consumer = consumer or deciding_thread(verdict)
    waited_at = verdict.main.user_frame if verdict.main else None
    in_job = other_threads_in_job_code(verdict, consumer)
    # Peers idle at the same get and threads idle in Thread.join cannot put: the same test as
    # for an event's setter.
    busy = [t for t in in_job if not cannot_signal(t, waited_at)] + pending_timers(verdict, consumer)
    others = ", ".join(sorted(str(t.name or t.os_thread_id) for t, _ in verdict.threads if t is not consumer))
    if busy:
        names = ", ".join(str(t.name or t.os_thread_id) for t in busy)
        node.evidence.append(f"waits on {what} that threads of this process fill; threads running job code that may: {names}")
        return
    if consumer is not None and (timed := timed_wait(consumer)) is not None:
        node.evidence.append(timed_wait_text(frame_text(waited_at), timed))
        return
    if (handed := _putter_in_flight(verdict, waited_at) or _suspended_calls(verdict, running or [])) is not None:
        node.state = "blocked"
        node.evidence.append(handed)
        return
    node.pattern = "producer-gone"
    node.state = "blocked"
    joiners = [t for t in in_job if joins(t)]
    if joiners:
        where = ", ".join(f"{t.name or t.os_thread_id} at {frame_text(job_frame(t))}" for t in joiners)
        node.evidence.append(
            f"waits on {what} that only threads of this process can fill; the other thread(s) running job "
            f"code wait in Thread.join for threads of this process to end ({where}): a put placed after that join "
            "(a stop sentinel sent after executor.shutdown(wait=True) / the end of a `with` pool block) can never "
            "run — the process waits on itself. Put before joining")
        return
    node.evidence.append(
        f"waits on {what} that only threads of this process can fill, and no other thread runs "
        f"job code (threads: {others or 'none'}): the producer thread is gone — it returned or died "
        "(a thread's traceback goes to this worker's .err log)")


_QUEUE_GET = re.compile(r"\b(self\.\w+)\.get(_nowait)?\s*\(")


def _putter_in_flight(verdict: ProcessVerdict, waited_at: Frame | None) -> str | None:
    """The consumer's queue is `self.Q`, and the running method of the actor (an async call with
    no frame, read from its class's source: `Process.awaiting`) puts into that very queue and then
    awaits: the producer is no thread that is gone but a call in flight that already passed its
    put (the queue is empty: the consumer drained it). What it waits on is that call's await, not
    the queue. The evidence line when so (None otherwise)."""
    facts = verdict.process.awaiting
    match = _QUEUE_GET.search(waited_at.code or "") if waited_at is not None else None
    if not isinstance(facts, dict) or match is None:
        return None
    method = str(facts.get("method") or "")
    def class_of(qualname: str) -> str:
        return qualname.rsplit(".", 1)[0].rsplit(".", 1)[-1]

    if waited_at is not None and class_of(waited_at.function) != class_of(method):
        return None  # another class's queue of the same name
    puts = [str(x) for x in facts.get("puts") or [] if str(x).rsplit(":", 1)[0] == match.group(1)]
    if not puts:
        return None
    pending = ", ".join(str(x) for x in facts.get("pending") or []) or "a Future"
    return (f"its queue {match.group(1)} is filled by {method} (put at line {puts[0].rsplit(':', 1)[-1]}), a call of this "
            f"actor RUNNING with no frame: a coroutine suspended at its await ({pending}) after its put — the producer is "
            "not gone, the consumer drained what it put; the call waits on what it awaits, not on the queue")


def _suspended_calls(verdict: ProcessVerdict, running: list[TaskRow]) -> str | None:
    """An async actor (Ray's `AsyncIO Thread:` loop thread in the dump) with RUNNING calls whose
    method has no frame on any thread, and no reading of what they do (`Process.awaiting`): each
    is a coroutine suspended in await, alive, that may yet put into the queue — no producer is
    known to be gone. The evidence line when so (None otherwise)."""
    if verdict.process.awaiting is not None or not any(str(t.name or "").startswith("AsyncIO Thread: ")
                                                       for t, _m in verdict.threads):
        return None
    shown = {f.function.rsplit(".", 1)[-1] for t, _m in verdict.threads for f in t.frames}
    suspended = sorted({str(t.name) for t in running if str(t.name).rsplit(".", 1)[-1] not in shown})
    if not suspended:
        return None
    return (f"{', '.join(suspended)} RUNNING on this async actor with no frame on any thread: coroutine(s) suspended "
            "in await, alive, that may put into its queue.Queue (what they await was not read from the source): no "
            "producer is known to be gone")


# ray.util.queue's calls on its queue actor, by side: what a blocked put waits for is a get, and
# the other way round.
_PUTS = re.compile(r"\.put(_nowait(_batch)?)?$")
_GETS = re.compile(r"\.get(_nowait(_batch)?)?$")


def _edges_to_the_other_side(b: Builder, key: str) -> bool:
    """A ray.util.queue whose put is blocked (full) waits for the processes that get from it; one
    whose get is blocked (empty), for those that put into it. Who they are is in the queue actor's
    own calls: each call's parent task is the caller's. A full queue nobody ever read from waits
    for the process that feeds its writer through another queue (a request/response loop: the one
    that sends requests reads the results), when every process of the job is itself waiting (none
    is free to be the reader). True when an edge was made."""
    me = b.g.nodes[key]
    if me.pattern == "producer-gone" and b.g.out(key):
        return True  # decided already, from its consumer's edge (_edge_to_own_queue)
    mine = b.index.of_actor(me.actor_id)
    full = any(t.state == "RUNNING" and _PUTS.search(t.name) for t in mine)
    empty = any(t.state == "RUNNING" and _GETS.search(t.name) for t in mine)
    if full == empty:
        return False  # no call blocked on it, or both sides blocked at once: nothing to decide from
    me.pattern, me.state = "queue-get-wait", "blocked"
    side, verb = (_GETS, "gets from") if full else (_PUTS, "puts into")
    callers = _callers(b, [t for t in mine if side.search(t.name)], key)
    for caller, n in callers.items():
        b.g.add_edge(key, caller, "queue-get-wait",
                     f"{'full' if full else 'empty'}: waits until {b.g.nodes[caller].label()} {verb} it "
                     f"(it did {n} time(s) before)")
    if callers:
        return True
    if not full:
        return _never_fed(b, key)
    free = [n for k, n in b.g.nodes.items() if k != key and n.class_name != QUEUE_ACTOR_CLASS and k in b.verdicts
            and n.state not in ("blocked", "dead")]
    writers = _callers(b, [t for t in mine if _PUTS.search(t.name)], key)
    feeders = {f for w in writers for f in _feeders(b, w, key)}
    if free or not feeders:
        return False
    for feeder in sorted(feeders):
        b.g.add_edge(key, feeder, "never-read",
                     f"full, and nothing ever got from it: {b.g.nodes[feeder].label()}, which feeds its writer through "
                     "another queue, is the one to read it back, but waits itself")
    return True


def _feeders(b: Builder, writer: str, queue_key: str) -> set[str]:
    """The processes that put into the queues `writer` gets from (other than `queue_key`)."""
    out: set[str] = set()
    for q_key, node in b.g.nodes.items():
        if q_key == queue_key or node.class_name != QUEUE_ACTOR_CLASS:
            continue
        calls = b.index.of_actor(node.actor_id)
        if writer in _callers(b, [t for t in calls if _GETS.search(t.name)], q_key):
            out |= set(_callers(b, [t for t in calls if _PUTS.search(t.name)], q_key)) - {writer}
    return out


def _callers(b: Builder, calls: list[TaskRow], key: str) -> dict[str, int]:
    """The graph nodes that made `calls` (by parent task: a running task's process, or the
    driver), with how many each made; never the queue itself or another queue actor."""
    by_task = {t.task_id: k for k, running in b.running.items() for t in running}
    driver = next((k for k, v in b.verdicts.items() if v.process.role == "driver"), None)
    out: dict[str, int] = {}
    for call in calls:
        parent = call.parent_task_id or ""
        who = by_task.get(parent) or (driver if parent == DRIVER_TASK_PREFIX + str(b.job_id) else None)
        if who is not None and who != key and b.g.nodes[who].class_name != QUEUE_ACTOR_CLASS:
            out[who] = out.get(who, 0) + 1
    return out


def _edge_to_own_queue(b: Builder, key: str) -> bool:
    """A process blocked on a ray.util.queue waits on the queue actor its unfinished call goes to
    (the call's target actor; its parent task is the caller's running task): that queue, not any
    queue of the job. When nobody alive feeds that queue (`_never_fed`), the wait goes through it
    to its producer. True when an edge was made."""
    own = b.own_calls(key)
    calls = [t for t in b.tasks if t.parent_task_id in own and t.state not in DONE_STATES and t.actor_id
             and (a := b.actors.get(t.actor_id)) is not None and a.class_name == QUEUE_ACTOR_CLASS]
    made = False
    for call in calls:
        dst = b.actor_node.get(str(call.actor_id))
        if dst is None or dst == key or not _never_fed(b, dst):
            continue
        b.g.add_edge(key, dst, "queue-get-wait", f"its queue is {b.g.nodes[dst].label()}: its call {call.name} "
                     f"({call.state}) runs there")
        made = True
    return made


def _never_fed(b: Builder, key: str) -> bool:
    """An empty ray.util.queue (a get blocked on it) that nobody ever put into, while no process
    of the job is free to put into it (every one blocked, nothing pending): nobody alive feeds it
    (producer-gone). The producer is then the one that put into another queue actor of the job
    nobody reads from, and finished: it wrote into another instance. True when decided."""
    me = b.g.nodes[key]
    if me.pattern == "producer-gone":
        return True  # decided already (from its consumer's edge)
    mine = b.index.of_actor(me.actor_id)
    if any(_PUTS.search(t.name) for t in mine) or not any(t.state == "RUNNING" and _GETS.search(t.name) for t in mine):
        return False
    unfinished = [t for t in b.tasks if t.state not in DONE_STATES and t.type != "ACTOR_CREATION_TASK"
                  and t.actor_id != me.actor_id and (b.actors.get(str(t.actor_id)) is None
                                                    or b.actors[str(t.actor_id)].class_name != QUEUE_ACTOR_CLASS)]
    by_task = {t.task_id: k for k, running in b.running.items() for t in running}
    free = [k for k, n in b.g.nodes.items() if k != key and k in b.verdicts and n.class_name != QUEUE_ACTOR_CLASS
            and n.state not in ("blocked", "dead")]
    if free or any(t.state != "RUNNING" or t.task_id not in by_task for t in unfinished):
        return False  # someone may still put into it
    if _held_in_actor_pool(b, key):
        return True
    me.pattern, me.state = "producer-gone", "blocked"
    gone = _finished_producers(b, key)
    if not gone:
        me.evidence.append("empty, and nothing ever put into it; every process of the job waits (none is free to "
                           "put into it) and nothing is pending: nobody alive feeds it")
        return True
    for producer, (other, items) in gone.items():
        b.g.add_edge(key, producer, "queue-get-wait",
                     f"empty and never put into: no process of the job is free to put into it; "
                     f"{b.g.nodes[producer].label()} put {items} item(s) into another queue, {other}, nobody "
                     "gets from, and finished: it fed another instance")
    return True


# ray.util.ActorPool's waits for its results (get_next, get_next_unordered, map, map_unordered).
_ACTOR_POOL_FILE = re.compile(r"(^|/)ray/util/actor_pool\.py$")


def _held_in_actor_pool(b: Builder, key: str) -> bool:
    """An empty ray.util.queue nobody alive is free to feed, while a process of the job waits for
    a ray.util.ActorPool's results: the pool sends a call only to an idle actor, and calls
    submitted while every actor was busy sit in `_pending_submits`, in that process's memory (no
    stack or task row shows them). The consumers are the pool's busy actors; the call that would
    put into the queue may be one of those unsent (executor-self-wait: the pool waits on itself).
    An edge from the queue to each such holder; True when one was made."""
    me = b.g.nodes[key]
    holders = [k for k, verdict in b.verdicts.items() if k != key and b.g.nodes[k].class_name != QUEUE_ACTOR_CLASS
               and any(_ACTOR_POOL_FILE.search(f.file) for t, _ in verdict.threads for f in t.frames if not f.native)]
    for holder in holders:
        node = b.g.nodes[holder]
        frame = next(f for t, _ in b.verdicts[holder].threads for f in t.frames
                     if not f.native and _ACTOR_POOL_FILE.search(f.file))
        node.evidence.append(
            f"waits for a ray.util.ActorPool's results ({frame.function}): the pool sends a call only to an idle "
            f"actor, and every actor of the job waits on {me.label()}, which is empty and was never put into. A "
            "call submitted to the pool after them sits unsent in its `_pending_submits`, in this process's memory "
            "(no stack or task row shows it): the call that would put into the queue may be one of them")
        choose(node, "actor_pool_pending_submit")  # the loop's pattern is its closing edge's (rootcause)
        b.g.add_edge(key, holder, "executor-self-wait",
                     f"empty, never put into; {node.label()} holds the pool whose unsent calls may feed it")
    return bool(holders)


def _finished_producers(b: Builder, key: str) -> dict[str, tuple[str, int]]:
    """Finished tasks that put into another queue actor of the job that nobody gets from: a node
    each (graphed here), with that queue's label and how many items it holds from them."""
    finished = {t.task_id: t for t in b.tasks if t.state == "FINISHED" and t.type != "ACTOR_CREATION_TASK"}
    out: dict[str, tuple[str, int]] = {}
    for q_key, node in list(b.g.nodes.items()):
        if q_key == key or node.class_name != QUEUE_ACTOR_CLASS or node.actor_id is None:
            continue
        calls = b.index.of_actor(node.actor_id)
        if any(_GETS.search(t.name) for t in calls):
            continue
        puts = [t for t in calls if _PUTS.search(t.name) and t.state == "FINISHED"]
        for task_id in {str(t.parent_task_id) for t in puts if t.parent_task_id in finished}:
            task = finished[task_id]
            producer = f"task:{task_id}"
            if producer not in b.g.nodes:
                b.g.nodes[producer] = GNode(key=producer, kind="task", name=task.name, state="idle", task_id=task_id,
                                            node_id=task.node_id, task_name=task.name, pattern="producer-gone")
                b.g.nodes[producer].evidence.append(
                    f"FINISHED: it put into {node.label()} (which nobody gets from), not into the queue the consumer "
                    "waits on — two Queue instances where one was meant (create the queue once, pass the handle)")
            out[producer] = (node.label(), sum(t.parent_task_id == task_id for t in puts))
    return out
