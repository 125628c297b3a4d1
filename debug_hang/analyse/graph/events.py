"""Event, Condition and asyncio waits: who could set what a thread waits on, and whether anything can."""

from __future__ import annotations

import re

from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.inprocess import (
    is_event_loop,
    loop_poll_timeout_ms,
    loop_timer,
    name_of,
    owners,
    pool_of,
    runs,
    timer_due,
)
from debug_hang.analyse.graph.model import QUEUED_STATES, GNode, WaitGraph
from debug_hang.analyse.graph.raycalls import reads_stream
from debug_hang.analyse.graph.setters import class_setters, follow_async_setters, free_parties, join_skipped, set_from_thread, setter_methods
from debug_hang.analyse.graph.sockets import loop_traffic
from debug_hang.analyse.graph.threads import (
    cannot_signal,
    deciding_thread,
    frame_text,
    job_frame,
    other_threads_in_job_code,
    pending_timers,
    reachable_from,
    rewait_loop,
    timed_wait,
    timed_wait_text,
    timer_release,
    waits_with_timeout,
)
from debug_hang.analyse.patterns import ProcessVerdict, catalog, is_library
from debug_hang.model import Frame, Thread
from debug_hang.rows import TaskRow
from debug_hang.snapshot import DONE_STATES, DRIVER_TASK_PREFIX, POLLING_TASKS


@graph_pass(after=("edges_supervisors",), decides=("async-await-stuck",))
def detect_async_await(b: Builder) -> None:
    """Async actors awaiting an in-process asyncio object nobody resolves (async-await-stuck)."""
    for key, verdict in b.verdicts.items():
        _detect_async_await(b, key, verdict)


def _detect_async_await(b: Builder, key: str, verdict: ProcessVerdict) -> None:
    """An async actor that others wait on, whose method runs but whose loop is idle and which
    awaits no Ray call: it awaits an in-process asyncio object, which only code of this actor can
    resolve - a coroutine of it, or a later call into it.

    A later call can come from a process of the job that still has work of its own: one running a
    call that does not wait for this actor's answer (not a caller, direct or up the chain, of the
    awaiting calls). While one exists, the await may be a rendezvous it has not reached (a barrier
    the other parties call once their own work ends), not a stuck one: the actor waits on that
    process. When every such process in turn waits on this actor, the waits close a deadlock; when
    there is none, nothing left in the job will resolve the await (async-await-stuck)."""
    g, running = b.g, b.running
    node = g.nodes[key]
    if node.pattern is not None or not running.get(key) or g.out(key) or not g.into(key):
        return
    loops = [t for t, _m in verdict.threads if is_event_loop(t)]
    if not loops or any(t.active for t in loops):
        return
    doing = ", ".join(sorted({str(t.name) for t in running[key]}))
    receiving, seen = loop_traffic(b, key, loops)
    if receiving:
        # A coroutine reads a connection whose peer still sends (a throttled download, a paced
        # stream): the loop wakes as data comes, and nothing shows it is stuck.
        node.pattern, node.state, node.receiving = "io-wait", "blocked", receiving
        node.evidence.append(f"{doing} RUNNING, its event loop idle between reads (an awaiting coroutine has no "
                             f"stack); {seen}: a coroutine of it reads that connection, whose peer still sends")
        return
    if seen:
        node.evidence.append(seen)
    timer = loop_timer(loops[0])
    due = next((d for d in map(timer_due, loops) if d is not None), None)
    info = b.inp.info.get(verdict.process.ref)
    polls = [ms for ms in (loop_poll_timeout_ms(t, info) for t in loops) if ms is not None]
    if due is None and any(ms >= 0 for ms in polls):
        due = min(ms for ms in polls if ms >= 0) / 1000
    elif timer is None and polls and all(ms < 0 for ms in polls):
        timer = "with no timer scheduled (its epoll wait has no timeout)"
    if due is not None:
        # A coroutine sleeps or awaits with a timeout: it wakes on its own (a paced poll, a retry
        # back-off) and may find what it waits for. Nothing shows whether it ever will.
        node.release = (f"released by a timer in ≤{due:.3g} s: its event loop is idle with a timer due then (a "
                        "loop.call_later, an asyncio.sleep or a wait_for timeout), which runs on its own")
        node.evidence.append(f"{doing} RUNNING, its event loop idle with a timer due in {due:.3g}s (a loop.call_later, an "
                             "asyncio.sleep or a wait_for timeout pending): the awaiting coroutine wakes, or what it "
                             "awaits is resolved, on its own; whether it will find what it awaits is not seen")
        return
    if follow_async_setters(b, key, verdict, doing):
        return
    later = _later_callers(b, key)
    if later:
        node.state = "blocked"
        waits_back = all(key in _seen_reach(g, k) for k in later)
        for k in later:
            calls = ", ".join(sorted({str(t.name) for t in running.get(k, [])}))
            g.add_edge(key, k, "later-call",
                       f"{doing} awaits an asyncio object only code of this actor can resolve: a later call into it; "
                       f"{g.nodes[k].label()} runs {calls}, which does not wait for this actor's answer, and may make it",
                       guessed=not waits_back)
        node.evidence.append(
            f"{doing} RUNNING, its event loop idle" + (f" {timer}" if timer else "") + ": it awaits an asyncio object of "
            "this actor; the job's process(es) with work left that could still call in: "
            + ", ".join(g.nodes[k].label() for k in later)
            + (" - each of them waits, down its chain, on this actor" if waits_back else ""))
        return
    node.pattern, node.state = "async-await-stuck", "blocked"
    if skipped := join_skipped(b, key, verdict):
        node.evidence.append(f"{doing} RUNNING, its event loop idle" + (f" {timer}" if timer else "")
                             + f" and no Ray call of it unfinished: {skipped}")
        return
    if (timer or "").startswith("with no timer") and (threaded := set_from_thread(b, key, verdict)):
        node.evidence.append(f"{doing} RUNNING, its event loop idle" + (f" {timer}" if timer else "")
                             + f" and no Ray call of it unfinished: {threaded}")
        return
    _await_line(node, verdict)
    node.evidence.append(f"{doing} RUNNING, its event loop idle" + (f" {timer}" if timer else "")
                         + " and no Ray call of it unfinished: it awaits an asyncio object of this actor (Event, Queue, "
                         "Future, Lock) that nothing resolves; no other process of the job has work left that could "
                         "call in (every one waits for its answer, or runs nothing). Not seen: which object it awaits (an "
                         "awaiting coroutine has no stack) and whether a task of the actor that was to resolve it died "
                         "(asyncio logs that only once the dead Task is garbage-collected)")


def _await_line(node: GNode, verdict: ProcessVerdict) -> None:
    """The culprit line of an async actor whose stack shows only its idle loop: never a frame of
    the loop (selectors.py, the library's): the await its RUNNING method's source shows
    (`Process.awaiting`), else none - a coroutine suspended in await is on no stack."""
    if node.user_frame is not None and not is_library(node.user_frame):
        return
    facts = verdict.process.awaiting
    line = facts.get("line") if isinstance(facts, dict) else None
    if isinstance(facts, dict) and isinstance(line, int) and line > 0:
        awaits = ", ".join(str(x) for x in facts.get("awaits") or [])
        joins = [str(x).split(" ", 1) for x in facts.get("joins") or []]
        code = joins[0][1] if joins and len(joins[0]) > 1 else f"await {awaits}" if awaits else None
        node.user_frame = Frame(function=str(facts.get("method") or ""), file=str(facts.get("file") or ""),
                                line=line, code=code)
        node.frame = node.user_frame
        return
    site = verdict.process.await_at
    line = site.get("line") if isinstance(site, dict) else None
    if isinstance(site, dict) and isinstance(line, int) and line > 0:
        node.user_frame = Frame(function=str(site.get("method") or ""), file=str(site.get("file") or ""),
                                line=line, code=str(site.get("code") or "") or None)
        node.frame = node.user_frame
        if _ACQUIRES.search(str(site.get("code") or "")):
            choose(node, "asyncio_permit_leaked")  # a lock or semaphore whose permit nobody gives back
        via = [str(v) for v in site.get("via") or []]
        node.evidence.append(f"line from the source: the running method's first await, {site.get('method')}:{line} "
                             f"`{site.get('code')}`" + (f" (reached through {' → '.join(via)})" if via else "")
                             + "; the awaiting coroutine is on no stack, so where it is suspended is not seen")
        return
    if node.frame is not None and is_library(node.frame):
        node.frame = node.user_frame = None
        node.evidence.append("line not visible: the awaiting coroutine is on no stack (the dump shows only the idle "
                             "event loop), and its method's source showed no await the probe reads")


# An await that takes a lock or a semaphore: `await self.sem.acquire()`, `async with self.lock:`.
_ACQUIRES = re.compile(r"^await [\w.\[\]]+\.acquire\(\)|^async with ")


# Edges that wait for a process to act - to call in, read on, take its turn - rather than for the
# answer of a call it runs: a process down such an edge is no caller waiting for an answer.
_ACTION_EDGES = frozenset({"later-call", "split-consumer-left", "generator-backpressure", "never-read", "train-barrier"})


def _answer_reach(g: WaitGraph, start: str) -> set[str]:
    """The nodes `start` is seen to wait on for an answer, directly or down a chain (not through
    an edge that waits for another process to act, nor through a guessed one)."""
    return _seen_reach(g, start, _ACTION_EDGES)


def _seen_reach(g: WaitGraph, start: str, skip: frozenset[str] = frozenset()) -> set[str]:
    """The nodes `start` waits on down edges that facts show (no guessed one), but those of `skip`."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for e in g.out(todo.pop()):
            if e.why not in skip and not e.guessed and e.dst not in seen:
                seen.add(e.dst)
                todo.append(e.dst)
    return seen


def _later_callers(b: Builder, key: str) -> list[str]:
    """The job's processes, other than `key`, that run a call of their own in job code and wait for
    no answer of `key`'s (no caller of its running calls, directly or up the chain of calls that
    wait for them, and no wait of theirs leads to it but through another process's action): the
    processes whose later calls could still reach `key`. Ray's own helper actors (no job frame on
    their stack) and processes that run nothing (idle actors, they act only when called) are not."""
    by_task = {str(t.task_id): (k, t) for k, tasks in b.running.items() for t in tasks if t.task_id}
    drivers = {k for k, n in b.g.nodes.items() if n.kind == "driver"}
    callers: set[str] = set()
    todo = [str(t.parent_task_id) for t in b.running.get(key, []) if t.parent_task_id]
    while todo:
        parent = todo.pop()
        if parent.startswith(DRIVER_TASK_PREFIX):
            callers |= drivers
        elif parent in by_task and by_task[parent][0] not in callers:
            k, task = by_task[parent]
            callers.add(k)
            todo.extend([str(task.parent_task_id)] if task.parent_task_id else [])
    out = []
    for k, verdict in b.verdicts.items():
        if k == key or k in callers or key in _answer_reach(b.g, k):
            continue
        works = k in drivers or any(t.name not in POLLING_TASKS for t in b.running.get(k, []))
        if works and any(job_frame(t) is not None for t, _m in verdict.threads):
            out.append(k)
    return sorted(out)


@graph_pass(after=("edges_collectives", "edges_resource_holders", "edges_train_barrier", "mark_stream_pacing",
                   "detect_full_queue_getter_puts"),
            decides=("event-setter-queued", "event-never-set", "generator-backpressure"))
def detect_event_waits(b: Builder) -> None:
    """Event/Condition waits that nothing can signal (event-setter-queued, event-never-set), a
    wait on an Event a FINISHED setting call set elsewhere first (by its timing and source, before
    the in-process edges, which read two such waiters as able to set each other)."""
    for key, verdict in b.verdicts.items():
        if _set_reached_another(b, key, verdict):
            continue
        if key in b.in_process:
            _detect_join_cycle(b, key, verdict)  # (else its threads' waits were followed by identity, inprocess.py)
            continue
        if _detect_async_slots_taken(b, key, verdict):
            if b.g.nodes[key].pattern == "event-setter-queued":
                _await_line(b.g.nodes[key], verdict)  # never the idle loop's selector line
            continue
        _detect_event_wait(b, key, verdict)
        if b.g.nodes[key].pattern == "event-never-set":
            _event_set_by_paused_generator(b, key)


def _detect_async_slots_taken(b: Builder, key: str, verdict: ProcessVerdict) -> bool:
    """An async actor whose running calls all await in its event loop while calls to it are queued.

    An async actor runs at most max_concurrency calls at once, awaiting ones included. When its
    RUNNING calls show in no thread (coroutines suspended in await: py-spy has no frame for them),
    wait on no Ray call, and calls to the same actor are queued behind them, those queued calls -
    the only other code of the actor that could run and set what they await - cannot start until
    one of them returns (event-setter-queued)."""
    node = b.g.nodes[key]
    running = [t for t in b.running.get(key, []) if t.name not in POLLING_TASKS]
    loops = [t for t, _m in verdict.threads if is_event_loop(t)]
    if node.pattern is not None or not running or not loops or b.g.out(key) or any(t.active for t in loops):
        return False
    if any(not is_event_loop(t) for t in other_threads_in_job_code(verdict, None)):
        return False
    queued = _queued_async_setters(b, key, verdict, running, [
        t for t in b.index.of_actor(node.actor_id) if t.state in QUEUED_STATES and not t.worker_pid])
    if not queued:
        return False
    turned = _slot_turned_over(b.index.of_actor(node.actor_id), running)
    due = next((d for t in loops if (d := _loop_wakes_in(t, b.inp.info.get(verdict.process.ref))) is not None), None)
    if turned or due is not None:
        # Its slots free up (a call ended while these ran), or its loop will run code of the
        # actor by itself (a timer: an asyncio.sleep, a wait_for timeout): not proven stuck.
        node.evidence.append(f"{len(running)} call(s) RUNNING here show in no thread (coroutines awaiting) while "
                             f"{len(queued)} call(s) are queued, but "
                             + (f"{turned} ended while they ran: its slots free up" if turned else
                                f"its event loop's next timer is due in {due:.3g}s: a sleeping coroutine or a timeout "
                                "runs then, and may release them"))
        return True
    node.pattern, node.state = "event-setter-queued", "blocked"
    b.paused.pop(key, None)  # not a generator paused mid-stream: coroutines awaiting
    doing = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in _counted(running))
    names = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in _counted(queued))
    node.evidence.append(
        f"{len(running)} call(s) RUNNING here ({doing}) show in no thread: they are coroutines suspended in await "
        "(py-spy shows no frame for an awaiting coroutine), and they wait on no Ray call")
    timer = loop_timer(loops[0])
    node.evidence.append(f"its event loop ({name_of(loops[0])}) is idle in its selector" + (f", {timer}" if timer else ""))
    node.evidence.append(
        f"{len(queued)} call(s) to this actor are queued behind them ({names}, {queued[0].state}): an async actor runs "
        f"at most max_concurrency calls at once, awaiting ones included, so these - the only other code of this actor "
        f"that could set what the {len(running)} running call(s) await - cannot start until one of them returns")
    return True


def _queued_async_setters(b: Builder, key: str, verdict: ProcessVerdict, running: list[TaskRow],
                          queued: list[TaskRow]) -> list[TaskRow]:
    """The queued calls that could resolve what the running (awaiting) calls await: when the probe
    read from the class's source what the running method awaits and which methods of the class set
    it (`Process.awaiting`), only the queued calls of those methods - more calls of the awaiting
    method would await too. All of them when that was not read (any might be a setter). When none
    is kept, the await goes on to who could call a setter (detect_async_await: the driver after its
    wait, set-order-deadlock; nobody, async-await-stuck)."""
    node, facts = b.g.nodes[key], verdict.process.awaiting
    if not queued or not isinstance(facts, dict):
        return queued
    method = str(facts.get("method", "")).rsplit(".", 1)[-1]
    if method not in {_method(t.name) for t in running}:
        return queued  # read for another call than the one running
    methods = class_setters(node, [str(x) for x in facts.get("setters") or []])
    if not methods:
        return queued
    kept = [t for t in queued if _method(t.name) in methods]
    if not kept:
        short = str(facts.get("file", "")).rsplit("/", 1)[-1]
        names = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in _counted(queued))
        sets = ", ".join(f"{node.class_name}.{m} ({short}:{line})" for m, line in sorted(methods.items()))
        node.evidence.append(f"{len(queued)} call(s) queued on this actor ({names}) never resolve what its running "
                             f"call(s) await: only {sets} does")
    return kept


def _slot_turned_over(calls: list[TaskRow], running: list[TaskRow]) -> str:
    """A call of the actor that ended after one of its running calls started ("" when none did):
    the actor's slots are not all held for good."""
    starts = [t.start_time_ms for t in running if t.start_time_ms]
    if not starts:
        return ""
    ended = [t for t in calls if t.state in DONE_STATES and t.end_time_ms and t.end_time_ms > min(starts)
             and t.name not in POLLING_TASKS]
    return f"{ended[0].name} ({ended[0].state})" if ended else ""


def _loop_wakes_in(thread: Thread, info: dict[str, object] | None) -> float | None:
    """In how many seconds an idle event loop runs a timer (its `_run_once` timeout, or the epoll
    timeout the node read); None when no timer is due or it was not read."""
    due = timer_due(thread)
    if due is not None:
        return due
    ms = loop_poll_timeout_ms(thread, info)
    return ms / 1000.0 if ms is not None and ms >= 0 else None


def _counted(tasks: list[TaskRow]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for task in tasks:
        counts[str(task.name)] = counts.get(str(task.name), 0) + 1
    return sorted(counts.items())


def _detect_event_wait(b: Builder, key: str, verdict: ProcessVerdict) -> None:
    """A thread in Event.wait / Condition.wait that waits on no Ray work: who could signal it?

    Calls queued on the same actor behind the waiting method cannot run before it returns
    (event-setter-queued); with no queued call and no other thread in job code, nothing in the
    process will set it (event-never-set). A live thread in job code may still: left a symptom.
    """
    g, index, running = b.g, b.index, b.running
    node = g.nodes[key]
    if node.pattern != "event-wait" or verdict.main is None or g.out(key):
        return
    where = frame_text(verdict.main.user_frame or verdict.main.frame)
    doing = ", ".join(sorted({str(t.name) for t in running.get(key, [])})) or "its current call"
    waiting = [t for t in index.of_actor(node.actor_id) if t.state in QUEUED_STATES and not t.worker_pid]
    queued = _releasing_queued(b, key, verdict, waiting)
    none_queued = "none of the calls queued on it sets it" if waiting else "no call to it is queued"
    if queued:
        node.pattern, node.state = "event-setter-queued", "blocked"
        names = ", ".join(sorted({str(t.name) for t in queued}))
        node.evidence.append(f"waits at {where} inside {doing}, while {len(queued)} call(s) to this actor are queued "
                             f"behind it ({names}): they cannot start until it returns, so none of them can signal it")
        return
    waiter = deciding_thread(verdict)
    rewait = rewait_loop(waiter) if waiter is not None else None
    if waiter is not None and (timed := timed_wait(waiter)) is not None and rewait is None:
        node.evidence.append(timed_wait_text(where, timed))
        return
    if rewait is not None:
        node.evidence.append(f"waits at {where} with a timeout, but the loop at line {rewait.line} only waits again "
                             "when it times out (its body only logs): it returns only when signalled, as an untimed "
                             "wait does")
    timers = pending_timers(verdict, waiter)
    if timers:
        node.release = timer_release(timers, verdict.main.user_frame or verdict.main.frame)
        node.evidence.append(f"waits at {where} inside {doing}; {node.release}: a setter that has not run yet")
        return
    others = [t for t in other_threads_in_job_code(verdict, waiter) if not cannot_signal(t, verdict.main.user_frame)]
    joiners = [(t, text) for t in other_threads_in_job_code(verdict, waiter)
               if (text := _joins_before_setting(b, key, t, waiter))]  # (a joiner counts as unable to signal)
    idle_pollers = [text for t in others if (text := _poll_cannot_act(b, key, t, waiter, others))]
    pooled = [text for t in others if (text := _pool_waits_for_later_set(b, key, t, waiter))]
    if pooled and len(pooled) == len(others) and waiter is not None:
        node.pattern, node.state = "event-never-set", "blocked"
        node.evidence.append(f"waits at {where} inside {doing} for futures of a thread pool; {none_queued} and it "
                             "waits on no Ray task; every other thread of this process in job code is a worker of a "
                             "pool that waits for it:")
        node.evidence.extend(f"  {text}" for text in pooled)
        node.evidence.append("each waits for the other: the workers take no job until their wait returns, and the "
                             "only set comes after the wait for the pool's futures")
        b.deciding[key] = waiter
        choose(node, "set_after_pool_wait")
        return
    if len(idle_pollers) + len([t for t, _x in joiners if t in others]) < len(others):
        return
    node.pattern, node.state = "event-never-set", "blocked"
    if joiners:
        thread, text = joiners[0]
        at = job_frame(thread)
        node.evidence.append(f"waits at {where} inside {doing}; {none_queued} and it waits on no Ray task; {text}")
        node.frame = node.user_frame = at  # the line to change: the join before the set
        b.deciding[key] = thread
        choose(node, "set_after_join")
        return
    if idle_pollers:
        node.evidence.append(f"waits at {where} inside {doing}; {none_queued} and it waits on no Ray task; "
                             "the only other thread of this process in job code cannot set it:")
        node.evidence.extend(f"  {text}" for text in idle_pollers)
        return
    node.evidence.append(f"waits at {where} inside {doing}; no other thread of this process runs job code, {none_queued} "
                         "and it waits on no Ray task: nothing here will set it (a setter thread that died "
                         "leaves its traceback in this worker's .err log)")


def _releasing_queued(b: Builder, key: str, verdict: ProcessVerdict, queued: list[TaskRow]) -> list[TaskRow]:
    """The queued calls that could release the wait: for a put into a full queue.Queue, not the
    calls of a method seen blocked in a put on that same queue (they would only put too: a put is
    released by a get), unless the source names that method a getter of the queue."""
    from debug_hang.analyse.graph.queue_full import releasing_calls, same_put_methods  # it imports this module

    waiter = deciding_thread(verdict)
    found = same_put_methods(b, key, waiter) if queued and waiter is not None else None
    if found is None:
        return _queued_setters(b, key, verdict, queued)
    receiver, putting, getting = found
    releasing = set(releasing_calls(b, key, putting, getting))
    kept = [t for t in queued if str(t.name) in releasing]
    if len(kept) < len(queued):
        b.g.nodes[key].evidence.append(
            f"{len(queued) - len(kept)} call(s) queued on this actor run the same put into {receiver} the waiting "
            f"thread(s) are blocked in: a put into a full queue is released only by a get, so they cannot release it")
    return kept


def _queued_setters(b: Builder, key: str, verdict: ProcessVerdict, queued: list[TaskRow]) -> list[TaskRow]:
    """The queued calls whose method sets what the wait is on: one of the methods of the actor's
    class that the source shows setting it (`setter_methods`, read on the node: `self.X.set()`, or
    a call on self of a method that does). A queued call of another method - more of the waiting
    method, which would wait too - cannot release it, however long it waits its turn: when no
    queued call is a setter, none is kept, and the wait goes on to who could call a setter (the
    driver after its wait: set-order-deadlock; nobody: event-never-set). All of them are kept when
    the source named no setter (not read: any of them might be one)."""
    node = b.g.nodes[key]
    frame = verdict.main.user_frame if verdict.main is not None else None
    if not queued or frame is None or node.kind != "actor":
        return queued
    methods = setter_methods(node, frame)
    if not methods:
        return queued
    kept = [t for t in queued if _method(t.name) in methods]
    if not kept:
        names = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in _counted(queued))
        sets = ", ".join(f"{node.class_name}.{m} ({frame.short_file}:{line})" for m, line in sorted(methods.items()))
        node.evidence.append(f"{len(queued)} call(s) queued on this actor ({names}) never set what it waits on: "
                             f"only {sets} does")
    return kept


def _event_set_by_paused_generator(b: Builder, key: str) -> None:
    """An event nothing in its process sets, while a task of the job is paused mid-stream.

    A streaming generator (num_returns="streaming") paused by back-pressure shows no thread: its
    frame is suspended between two yields until its consumer (the process that submitted it)
    reads the next item. When that consumer is not reading the stream but waits, directly or down
    a chain, on this event, the generator is the only job work that can still run and call in to
    set it, and it runs again only once the consumer reads: a cycle. The consumer's wait (it stopped
    reading before the stream ended) is what to change.
    """
    g = b.g
    reach = reachable_from(g, key)
    for gen_key, calls in b.paused.items():
        parents = {str(t.parent_task_id) for t in calls}
        for consumer in (k for k in b.verdicts if k != gen_key and b.own_calls(k) & parents):
            main = b.verdicts[consumer].main
            thread = deciding_thread(b.verdicts[consumer])
            reading = reads_stream(thread)
            if main is None or reading or key not in reachable_from(g, consumer) or gen_key in reach:
                continue
            names = ", ".join(sorted({str(t.name) for t in calls}))
            where = frame_text(main.user_frame or main.frame)
            node, gen = g.nodes[key], g.nodes[gen_key]
            node.pattern = "event-wait"
            node.evidence[-1] = (f"{node.evidence[-1].split(';')[0]}; no other thread of this process runs job code "
                                 f"and no call to it is queued: the job's only work that can still run and set it is "
                                 f"{names}, paused mid-stream")
            g.add_edge(key, gen_key, "event-wait",
                       f"nothing in its process sets the event; {names} (RUNNING, paused) is the job's only work left that could set it")
            gen.pattern, gen.state = "generator-backpressure", "blocked"
            gen.evidence.append(
                f"{names} RUNNING with no thread in it in every sample: a streaming generator paused by back-pressure "
                f"between two yields; it resumes only when its consumer {g.nodes[consumer].label()} reads its next item, "
                f"and the consumer waits at {where} instead of reading")
            g.add_edge(gen_key, consumer, "generator-backpressure",
                       f"paused mid-stream until {g.nodes[consumer].label()} reads the next item (it waits at {where})")
            return


def _detect_join_cycle(b: Builder, key: str, verdict: ProcessVerdict) -> None:
    """An in-process cycle of two waits and no lock: a thread waits on an Event or Condition that
    the thread joining it would set, and that joiner's source sets it only after its join
    (`_joins_before_setting`): event-never-set at the joiner's join, the line to change."""
    node, found = b.g.nodes[key], b.in_process[key]
    if node.pattern != "event-wait" or found.end is not None or b.g.out(key):
        return
    if any(e.kind in ("lock", "semaphore") for e in found.cycle):
        return
    for join in (e for e in found.cycle if e.kind == "join"):
        waits = [e for e in found.cycle if e.src is join.dst and e.dst is join.src and e.kind in ("event", "condition")]
        text = _joins_before_setting(b, key, join.src, join.dst) if waits else ""
        if not text:
            continue
        if any(t is not join.src and t is not join.dst for t in other_threads_in_job_code(verdict, join.dst)):
            return  # a third thread in job code may still act
        node.pattern, node.state = "event-never-set", "blocked"
        node.evidence.append(f"thread {name_of(join.dst)} waits at {frame_text(job_frame(join.dst))}; {text}")
        node.frame = node.user_frame = job_frame(join.src)
        b.deciding[key] = join.src
        choose(node, "set_after_join")
        return


def _benign(pattern: str) -> bool:
    """A thread reading of the catalog's benign kind (Ray's housekeeping, an idle worker loop)."""
    found = catalog().get(pattern) if pattern != "unknown" else None
    return found is not None and found.kind == "benign"


_THREAD_JOIN = re.compile(r"(^|/)threading\.py$")


def _joins_before_setting(b: Builder, key: str, thread: Thread, waiter: Thread | None) -> str:
    """Why `thread` cannot set what `waiter` waits on ("" when it may): it is idle in an untimed
    Thread.join inside the very function whose later line sets it (the waiter's setters, read
    from the source: `Exporter.export:36`), at an earlier line. It sets only once the join
    returns, and the join returns only once the joined thread ends - and no other thread of the
    process but the waiter runs job code, so the thread it joins is the waiter (or one that
    waits on it): each waits for the other."""
    frame = job_frame(thread)
    wanted = job_frame(waiter) if waiter is not None else None
    if frame is None or wanted is None or frame.line is None or runs(thread, b.inp.info.get(b.g.nodes[key].ref)):
        return ""
    if waits_with_timeout(thread) or not any(f.name == "join" and _THREAD_JOIN.search(f.file)
                                             for f in thread.frames if not f.native):
        return ""
    verdict = b.verdicts[key]
    if any(t is not thread and t is not waiter and not _benign(m.pattern) for t, m in verdict.threads):
        return ""  # a third thread (in a library's code, say a download) may be the one it joins: it ends
    for entry in wanted.setters or []:
        name, _, line = entry.rpartition(":")
        if name == frame.function and line.isdigit() and frame.line < int(line) and frame.file == wanted.file:
            return (f"the only thread that could set it, {name_of(thread)}, joins a thread at {frame_text(frame)} "
                    f"(no timeout) and sets it only later in the same function (line {line}): the join returns only "
                    "once the joined thread ends, and the thread it joins is the waiter (no other thread of this "
                    "process runs job code) - each waits for the other")
    return ""


_FUTURE_WAIT = re.compile(r"concurrent/futures/_base\.py$")


def _pool_waits_for_later_set(b: Builder, key: str, thread: Thread, waiter: Thread | None) -> str:
    """Why a ThreadPoolExecutor worker cannot complete the futures `waiter` waits on ("" when it
    may): it is idle in an untimed Event/Condition wait in job code - in the pool's initializer
    (no job taken yet: `_worker` calls it before its first job) or in a job - and the source names
    as its only setter a later line of a function the waiter is in (`ReportRenderer.render:44`,
    while the waiter waits at line 43 in Future.result / wait / as_completed, untimed). The set
    comes only after the waiter's wait returns, and that wait returns only when the pool's
    workers finish: each waits for the other."""
    if waiter is None or runs(thread, b.inp.info.get(b.g.nodes[key].ref)) or thread.active:
        return ""
    if pool_of(thread) is None or waits_with_timeout(thread) or waits_with_timeout(waiter):
        return ""
    if not any(_FUTURE_WAIT.search(f.file) and f.name in ("result", "wait", "as_completed")
               for f in waiter.frames if not f.native):
        return ""
    inner = next((f for f in thread.frames if not f.native), None)
    if inner is None or not inner.file.endswith("threading.py") or not inner.name == "wait":
        return ""  # not idle in a threading Event/Condition wait
    frame = job_frame(thread)
    if frame is None or not frame.setters:
        return ""
    mine = [f for f in waiter.frames if not f.native and not is_library(f) and f.line is not None]
    later: list[tuple[Frame, int]] = []
    for entry in frame.setters:
        name, _, line = entry.rpartition(":")
        if not line.isdigit():
            return ""
        hit = next((f for f in mine if f.function == name and f.file == frame.file and f.line is not None
                    and f.line < int(line)), None)
        if hit is None:
            if any(f.function == name for f in mine):
                return ""  # the waiter's own function sets it at an earlier line: a set already made
            continue  # the method that sets it (`_load_fonts`), reached through the waiter's later call, or
            # one another process would call in - none is queued, and the actor is busy in the waiter's call
        later.append((hit, int(line)))
    if not later:
        return ""
    at, set_line = later[0]
    stage = "its initializer" if not any(f.name == "run" and "_WorkItem" in f.function for f in thread.frames
                                         if not f.native) else "a job"
    return (f"thread {name_of(thread)} (a pool worker, in {stage}) waits at {frame_text(frame)} (no timeout); what it "
            f"waits on is set only at line {set_line} of {at.function}, after the waiter's wait at line {at.line} returns")


def _poll_cannot_act(b: Builder, key: str, thread: Thread, waiter: Thread | None, others: list[Thread]) -> str:
    """Why a live thread of job code cannot set what `waiter` waits on ("" when it may): it sleeps
    in a loop whose every call that could act runs only under `if` tests that read nothing but the
    state of one object (`len(self.pending) >= 8`), seen at the same line in every sample while the
    waiter stayed in its wait, and nothing else can change that state: no other thread of the
    process works on it (the waiter is blocked), no call to this actor is queued or running beside
    the waiting one, and every other process of the job waits on this one (none is free to call it)."""
    from debug_hang.analyse.busy import release_guard  # busy reads the graph's types: imported here

    frame = job_frame(thread)
    sleep = SLEEP_CALL.search(frame.code or "") if frame is not None else None
    if frame is None or waiter is None or sleep is None or runs(thread, b.inp.info.get(b.g.nodes[key].ref)):
        return ""  # (py-spy's active flag flickers under load: runs() weighs it with the node's reading)
    guard = release_guard(frame)
    me = (frame.facts or {}).get("self")
    if guard is None or not isinstance(me, str) or not all(r.startswith("self.") for r in guard.reads):
        return ""
    if any(t is not thread and me in owners(t) for t in others):
        return ""  # another thread works on the same object: it may change what the tests read
    seen, span = _same_line_in_every_sample(b, key, thread, frame)
    if not seen or not _same_line_in_every_sample(b, key, waiter, None)[0] or span < float(sleep.group(1)):
        return ""  # not seen to go round (a sleep as long as the samples' span) while the waiter waited
    node = b.g.nodes[key]
    mine = {t.key for t in b.running.get(key, [])}
    if any(t.state not in DONE_STATES and t.key not in mine for t in b.index.of_actor(node.actor_id)):
        return ""  # a call to this actor may change them
    if any(k != key and key not in reachable_from(b.g, k) and b.g.nodes[k].state not in ("dead",) for k in b.verdicts):
        return ""  # a process of the job that does not wait on this one may still call it
    return (f"thread {name_of(thread)} sleeps at {frame_text(frame)} in the loop `{guard.header}`, whose every call that "
            f"could act runs only when {' / '.join(f'`{t}`' for t in guard.tests)} holds; that reads only "
            f"{', '.join(guard.reads)} of {me.split('@')[0]}, which nothing else can change: no other thread works on it, "
            "no call to this actor is queued or running beside the waiting one, and every other process of the job "
            f"waits on this one. Compared: {seen}; the loop re-checks a state that cannot change")


SLEEP_CALL = re.compile(r"\bsleep\(\s*(\d+(?:\.\d*)?|\.\d+)\s*\)")  # a sleep of a literal length


def _same_line_in_every_sample(b: Builder, key: str, thread: Thread, frame: Frame | None) -> tuple[str, float]:
    """('the same line in N samples over S s', S) when the thread (by its id) shows the same
    innermost job frame and line in every sample of its process (at least two), ("", 0) otherwise."""
    node = b.g.nodes[key]
    samples = b.inp.samples.get(node.ref, [])
    tid = thread.os_thread_id or thread.thread_id or thread.name
    wanted = frame or job_frame(thread)
    if len(samples) < 2 or wanted is None:
        return "", 0.0
    for proc in samples:
        mine = next((t for t in proc.threads if (t.os_thread_id or t.thread_id or t.name) == tid), None)
        at = job_frame(mine) if mine is not None else None
        if at is None or (at.function, at.line) != (wanted.function, wanted.line):
            return "", 0.0
    times = [float(t) for t in (b.inp.info.get(node.ref) or {}).get("sampled_at") or [] if isinstance(t, (int, float))]
    span = max(times) - min(times) if len(times) >= 2 else 0.0
    return f"{name_of(thread)} at {wanted.function} line {wanted.line} in all {len(samples)} samples over {span:.1f}s", span


def _set_reached_another(b: Builder, key: str, verdict: ProcessVerdict) -> bool:
    """An actor's threads wait (no timeout) at `self.X.wait()` while a call of a method of its
    class that sets X on every normal return (read from its source: no branch, loop or early
    return around the set) FINISHED in the same process after the waiting calls started, and
    nothing in the class clears or rebinds X. A set Event stays set: had that set reached the
    object they wait on, their wait would have returned. So `self.X` does not name one object
    (a property handing out a per-thread Event from threading.local, or a new one per call): the
    set went to another, and nothing can set theirs - no setter call is running or queued, and
    no other thread of the process runs job code (event-never-set). True when decided."""
    node = b.g.nodes[key]
    if node.kind != "actor" or node.pattern != "event-wait" or b.g.out(key) or not node.class_name:
        return False
    waiters: list[tuple[Thread, Frame]] = []
    for thread, _m in verdict.threads:
        frame = job_frame(thread)
        if frame is not None and frame.setters and (frame.facts or {}).get("sets_always"):
            in_event = any(f.function.endswith("Event.wait") and f.file.endswith("threading.py") for f in thread.frames)
            if not in_event or timed_wait(thread) is not None or thread.active:
                return False
            waiters.append((thread, frame))
    if not waiters or len({(f.function, f.line) for _t, f in waiters}) != 1:
        return False
    if any(t not in [w for w, _f in waiters] for t in other_threads_in_job_code(verdict, waiters[0][0])):
        return False  # another thread runs job code: it may still set what they wait on
    frame = waiters[0][1]
    facts = frame.facts or {}
    if facts.get("resets"):
        return False  # cleared or rebound somewhere: a later round sets it again
    cls = node.class_name
    setters = {name.rsplit(".", 1)[-1] for name in (e.rpartition(":")[0] for e in frame.setters or []) if
               name.rpartition(".")[0].rsplit(".", 1)[-1] == cls}
    sure = [e for e in str(facts.get("sets_always")).split("; ") if e.rpartition(":")[0].rpartition(".")[0].rsplit(".", 1)[-1] == cls]
    calls = b.index.of_actor(node.actor_id)
    if any(t.state not in DONE_STATES and _method(t.name) in setters for t in calls):
        return False  # a setting call is running or queued: its set is still to come
    methods = {f.function.rsplit(".", 1)[-1] for w, _f in waiters for f in w.frames if not f.native and not is_library(f)}
    waiting = [t for t in b.running.get(key, []) if _method(t.name) in methods]
    starts = [t.start_time_ms for t in waiting if t.start_time_ms]
    if not waiting or len(starts) != len(waiting):
        return False
    sure_methods = {e.rpartition(":")[0].rsplit(".", 1)[-1]: e for e in sure}
    done = [t for t in calls if t.state == "FINISHED" and _method(t.name) in sure_methods and t.end_time_ms
            and t.end_time_ms > max(starts) and t.worker_pid == node.pid]
    if not done or free_parties(b, key):
        return False  # (a process that does not wait on this actor may still call in and change what X names)
    call = done[0]
    ended = float(call.end_time_ms or 0)
    entry = sure_methods[_method(call.name)]
    expr = next((m.group("recv") for m in [_WAIT_RECV.search(frame.code or "")] if m), "the object")
    node.pattern, node.state = "event-never-set", "blocked"
    choose(node, "event_in_thread_local")  # the set reached another object than the one waited on
    b.set_elsewhere[key] = str(call.name)
    where = frame_text(frame)
    node.evidence.append(
        f"{len(waiters)} thread(s) wait at {where} with no timeout ({len(waiting)} call(s) of "
        f"{', '.join(sorted({str(t.name) for t in waiting}))} RUNNING); {call.name} FINISHED in this process "
        f"{(ended - max(starts)) / 1000:.1f}s after the last of them started, and its source sets "
        f"`{expr}` on every normal return ({entry}); nothing in {cls} clears or rebinds it")
    objects = sorted({str((f.facts or {}).get("self")) for w, _f in waiters for f in w.frames
                      if f.function.endswith("Event.wait") and (f.facts or {}).get("self")})
    owners = {str((f.facts or {}).get("self")) for _w, f in waiters}
    if len(objects) > 1 and len(owners) == 1:
        node.evidence.append(f"the waiting threads wait at the same `{expr}` of the same {owners.pop().split('@')[0]} "
                             f"on {len(objects)} different objects ({', '.join(objects[:4])}): it names another "
                             "object in each thread")
    defined = str(facts.get("defined") or "")
    node.evidence.append(
        f"a set Event stays set: had that set reached the object they wait on, their wait would have returned. So "
        f"`{expr}` does not name one shared object" + (f" ({defined.rpartition(':')[0]} at line "
                                                       f"{defined.rpartition(':')[2]} computes it)" if defined else "")
        + " - one per thread (threading.local) or a new one per call: the set went to another, and nothing can set "
        "theirs (no setting call running or queued, no other thread of the process in job code, every other process "
        "of the job waits on this one). Keep one Event "
        "made in __init__ as an instance attribute")
    if defined and _ENTRY_AT.match(defined):
        name, _, line = defined.rpartition(":")
        node.user_frame = Frame(function=name, file=frame.file, line=int(line), code=None)
    return True


_WAIT_RECV = re.compile(r"(?P<recv>[\w.]+)\.wait\(")
_ENTRY_AT = re.compile(r"^[\w.<>]+:\d+$")


def _method(name: str | None) -> str:
    return str(name or "").rsplit(".", 1)[-1]
