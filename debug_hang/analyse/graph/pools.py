"""Executors: a thread or process pool whose every worker waits on work that only a free worker could run."""

from __future__ import annotations

import re

from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.inprocess import (
    ThreadGraph,
    describe,
    is_event_loop,
    is_process_pool_manager,
    name_of,
    pool_of,
    pool_running,
    runs,
)
from debug_hang.analyse.graph.libraries import serve_deployment_self_wait
from debug_hang.analyse.graph.model import QUEUED_STATES
from debug_hang.analyse.graph.threads import frame_text, job_frame, other_threads_in_job_code, waits_with_timeout
from debug_hang.analyse.patterns import is_library
from debug_hang.model import Frame, Process, ProcessRef, Thread


@graph_pass(after=("follow_threads",), decides=("executor-self-wait",))
def detect_pool_self_wait(b: Builder) -> None:
    """A process whose waits go round its thread pool's workers (executor-self-wait).

    Every running worker of one pool waits on a Future; a Future is completed by the job that
    runs it or, for a queued job, by the first worker to come free; the only other things in the
    process that could complete one are idle (an event loop whose coroutines await). Nothing moves.
    """
    for key in b.verdicts:
        if _process_pool_full(b, key) or _thread_pool_fed_by_itself(b, key) or _thread_pool_taken_by_service_loops(b, key):
            continue
        found = b.in_process.get(key)
        if found is None or found.end is not None or not found.cycle or any(e.kind != "future" for e in found.cycle):
            continue
        if any(is_process_pool_manager(t) for t in found.dormant):
            continue  # a process pool may yet complete them: its workers are other processes
        graph = b.thread_graphs[key]
        waiting = {id(e.src): e.src for e in found.cycle} | {id(e.dst): e.dst for e in found.cycle}
        pools: dict[str, list[Thread]] = {}
        for thread, _match in graph.verdict.threads:
            pool = pool_of(thread)
            if pool is not None:
                pools.setdefault(pool, []).append(thread)
        # Every worker of the pool runs a job and waits (an idle one would take a queued job).
        full = [(pool, workers) for pool, workers in pools.items()
                if all(id(w) in waiting and pool_running(w) for w in workers)]
        if not full:
            continue
        _mark(b, key, graph, found.start, full, found.dormant)
    # A Serve deployment is a pool too: its slots are its replicas' max_ongoing_requests.
    serve_deployment_self_wait(b)


def _mark(b: Builder, key: str, graph: ThreadGraph, start: Thread, full: list[tuple[str, list[Thread]]],
          dormant: list[Thread]) -> None:
    node = b.g.nodes[key]
    node.pattern, node.state = "executor-self-wait", "blocked"
    for pool, workers in full:
        names = ", ".join(name_of(w) for w in workers)
        node.evidence.append(f"thread pool with work queue {pool}: all {len(workers)} worker(s) ({names}) run a job "
                             "that waits on a Future; none is free to run a queued job")
        for worker in workers:
            node.evidence.append(f"  {describe(graph, worker)}")
    if not any(start is w for _p, workers in full for w in workers):
        node.evidence.append(f"{describe(graph, start)}: it waits on the pool's jobs")
    loops = [t for t in dormant if is_event_loop(t)]
    if loops:
        node.evidence.append(f"the event loop ({', '.join(name_of(t) for t in loops)}) is idle: a coroutine that would "
                             "complete a Future awaits (py-spy shows no frame for an awaiting coroutine), and one "
                             "awaiting run_in_executor on this pool waits for a free worker too")
    node.evidence.append("a Future is completed by the job that runs it, and a queued job starts only when a worker "
                         "is free: the jobs these workers wait for can never start")
    worker = next(iter(full[0][1]))
    match = graph.matches[id(worker)]
    node.frame, node.user_frame = match.frame, match.user_frame


_PROCESS_POOL = re.compile(r"concurrent/futures/process\.py$")


def _process_pool_full(b: Builder, key: str) -> bool:
    """A process waiting on Futures while every worker process of its ProcessPoolExecutor runs a
    job that is itself blocked: the jobs queued behind them (the ones the running jobs may wait
    for) never get a worker. The workers are the process's children under `_process_worker`,
    one pool per `call_queue` (an address a forked child shares with its parent)."""
    graph = b.thread_graphs.get(key)
    proc = b.verdicts[key].process
    if graph is None or node_is_decided(b, key):
        return False
    waiting = [w for w in graph.waits.values() if w.kind == "future"]
    if not waiting:
        return False
    pools: dict[str, list[tuple[str, Thread]]] = {}
    for (node_id, pid), info in b.inp.info.items():
        child_key = b.by_pid.get(ProcessRef(node_id, pid))
        if info.get("child_of") != proc.pid or node_id != proc.node_id or child_key is None:
            continue
        for thread, _match in b.verdicts[child_key].threads:
            queue = _call_queue(thread)
            if queue is not None:
                pools.setdefault(queue, []).append((child_key, thread))
    for queue, workers in pools.items():
        busy = [(k, t) for k, t in workers if _running_job(t) and _waits_on_the_pool(b, k, t)]
        if len(busy) != len(workers) or any(runs(t, b.inp.info.get(b.verdicts[k].process.ref)) for k, t in busy):
            continue
        node = b.g.nodes[key]
        node.pattern, node.state = "executor-self-wait", "blocked"
        node.evidence.append(f"{describe(graph, waiting[0].thread)}: a Future of its process pool (call queue {queue})")
        node.evidence.append(f"all {len(workers)} worker process(es) of that pool run a job that is blocked; none is free "
                             "to run a job queued behind them:")
        for child_key, thread in workers:
            where = next((f for f in thread.frames if not f.native and f.file.endswith(".py") and not is_library(f)), None)
            node.evidence.append(f"  worker pid {b.g.nodes[child_key].pid} waits at {frame_text(where)}")
        node.evidence.append("a Future is completed only when a worker finishes its job: if those jobs wait for "
                             "jobs still queued in the same pool (a consumer submitted before its producer), nothing moves")
        node.frame, node.user_frame = waiting[0].frame, waiting[0].where
        return True
    return False


def _thread_pool_fed_by_itself(b: Builder, key: str) -> bool:
    """A thread pool whose every worker runs a job blocked on an in-process object (a queue.Queue,
    an Event, a lock) that nothing running in the process can release - the in-process graph ends
    at one of those workers - while a thread of the process waits on the pool's Futures: only a
    job queued in that same pool (a producer submitted after its consumers) could release them,
    and it starts only when a worker is free. A process with calls queued on its actor, or with
    a job that waits with a timeout or runs, is left to other rules."""
    graph = b.thread_graphs.get(key)
    found = b.in_process.get(key)
    node = b.g.nodes[key]
    if graph is None or found is None or found.end is None or node.pattern not in (None, *_IN_PROCESS_READINGS):
        return False  # the in-process graph re-pointed it at the worker, and nothing else named it
    pool = pool_of(found.end)
    if pool is None or pool == "?" or not any(e.kind == "future" for e in found.path):
        return False
    if node.actor_id and any(t.actor_id == node.actor_id and t.state in QUEUED_STATES for t in b.tasks):
        return False  # a later call to the actor might release them (event-setter-queued's question)
    workers = [t for t, _m in graph.verdict.threads if pool_of(t) == pool]
    info = b.inp.info.get(graph.verdict.process.ref)
    kinds = {id(w.thread): w.kind for w in graph.waits.values()}
    if not workers or any(not pool_running(w) or kinds.get(id(w)) not in _IN_PROCESS_OBJECTS
                          or waits_with_timeout(w) or runs(w, info) for w in workers):
        return False
    if not _same_waits_in_every_sample(b.inp.samples.get(node.ref) or [], workers, graph):
        return False
    node.pattern, node.state = "executor-self-wait", "blocked"
    node.evidence.append(f"thread pool with work queue {pool}: all {len(workers)} worker(s) "
                         f"({', '.join(name_of(w) for w in workers)}) run a job that waits inside the process, and no "
                         "running thread of the process can release what they wait for:")
    for worker in workers:
        node.evidence.append(f"  {describe(graph, worker)}")
    node.evidence.append(f"{describe(graph, found.start)}: it waits on the pool's jobs")
    node.evidence.append("only a job queued in that same pool (a producer submitted after its consumers) could release "
                         "them, and a queued job starts only when a worker is free: none will be")
    match = graph.matches[id(workers[0])]
    node.frame, node.user_frame = match.frame, match.user_frame
    return True


def _thread_pool_taken_by_service_loops(b: Builder, key: str) -> bool:
    """A thread of the process waits, with no timeout, on Futures while every worker of the
    process's one thread pool runs a job that loops `while not self.X.wait(t):` - a service loop
    that wakes every `t` seconds and ends only when X is set - and nothing can set X: no code of
    its class sets it (the probe's `setters` of that line, read from the class's source on the
    node: none), or only the waiting thread's own function after the line it waits at. No other
    thread runs job code, no call to the actor is queued, every thread stays at its line in every
    sample with X unset. No worker will come free, so the jobs the waiter waits for stay queued
    in the pool's work queue: the service loops' jobs are the cause, the waiter their victim. A
    timed wait in a loop is no progress when nothing can end the loop."""
    graph = b.thread_graphs.get(key)
    node = b.g.nodes[key]
    if graph is None or node.pattern not in (None, *_IN_PROCESS_READINGS):
        return False
    if node.actor_id and any(t.actor_id == node.actor_id and t.state in QUEUED_STATES for t in b.tasks):
        return False  # a later call to the actor might set X
    from debug_hang.analyse.busy import event_paced_loop  # busy reads the graph's types: imported here
    info = b.inp.info.get(graph.verdict.process.ref)
    threads = [t for t, _m in graph.verdict.threads]
    workers = [t for t in threads if pool_of(t) is not None]
    pools = {pool_of(w) for w in workers}
    if len(pools) != 1 or "?" in pools or any(is_process_pool_manager(t) or is_event_loop(t) for t in threads):
        return False  # the Futures waited on are this one pool's (no other pool, loop or process pool completes one)
    waiters = [w for w in graph.waits.values() if w.kind == "future" and pool_of(w.thread) is None]
    if not waiters or any(waits_with_timeout(w.thread) or runs(w.thread, info) for w in waiters):
        return False
    loops: list[tuple[Thread, Frame, str]] = []
    for worker in workers:
        frame = job_frame(worker)
        obj = event_paced_loop(frame) if frame is not None and frame.context and frame.code else None
        if frame is None or obj is None or not pool_running(worker) or runs(worker, info) \
                or not _set_only_after_waits(frame.setters or [], [w.thread for w in waiters]):
            return False
        loops.append((worker, frame, obj))
    mine = {id(t) for t in workers} | {id(w.thread) for w in waiters}
    if any(id(t) not in mine for t in other_threads_in_job_code(graph.verdict, None)):
        return False  # another thread of the process runs job code: it may set X
    samples = b.inp.samples.get(node.ref) or []
    if len(samples) < 2 or not _same_waits_in_every_sample(samples, [*workers, *(w.thread for w in waiters)], graph) \
            or _event_set_in_a_sample(samples, workers):
        return False
    pool = next(iter(pools))
    node.pattern, node.state = "executor-self-wait", "blocked"
    lines: list[str] = []
    for waiter in waiters:
        lines.append(f"{describe(graph, waiter.thread)}: it waits, with no timeout, on Futures of the thread "
                             f"pool with work queue {pool}")
    lines.append(f"all {len(workers)} worker(s) of that pool ({', '.join(name_of(w) for w in workers)}) run a "
                         "service loop that ends only when an Event is set, and nothing can set it:")
    for worker, frame, obj in loops:
        who = "no code of its class sets it" if not frame.setters else \
            f"it is set only after the waiting line ({', '.join(frame.setters)})"
        lines.append(f"  {name_of(worker)} loops at {frame_text(frame)} in every sample, `{obj}` unset: "
                             f"{who} (read from the source on the node)")
    lines.append("a timed wait in a loop is no progress when nothing can end the loop: no worker will come free, "
                         "so the jobs waited for stay queued in the pool's work queue - the service loops submitted to "
                         "the shared pool hold every worker")
    node.evidence[:0] = lines  # first: a root cause shows its node's first evidence lines
    choose(node, "pool_taken_by_service_loops")
    match = graph.matches[id(workers[0])]
    node.frame, node.user_frame = match.frame, match.user_frame
    return True


def _set_only_after_waits(setters: list[str], waiting: list[Thread]) -> bool:
    """Every setter (`Cls.method:line`) is a function on a waiting thread's stack, at a line after
    the one that thread waits at: it runs only once that wait returns."""
    for entry in setters:
        name, _, line = entry.rpartition(":")
        if not line.isdigit() or not any(
                f.function == name and f.line is not None and int(line) > f.line
                for t in waiting for f in t.frames if not f.native and not is_library(f)):
            return False
    return True


def _event_set_in_a_sample(samples: list[Process], workers: list[Thread]) -> bool:
    """A worker's Event.wait saw its Event set (`signaled` true) in some sample: the loop is ending."""
    tids = {w.os_thread_id or w.thread_id for w in workers}
    return any((f.facts or {}).get("signaled") is True for p in samples for t in p.threads
               if (t.os_thread_id or t.thread_id) in tids for f in t.frames
               if not f.native and f.function.endswith("Event.wait"))


# What a thread pool's job may wait on that only a thread of the same process can release.
_IN_PROCESS_OBJECTS = frozenset({"lock", "event", "condition", "semaphore", "barrier"})
_IN_PROCESS_READINGS = ("event-wait", "queue-get-wait", "lock-wait")


def _same_waits_in_every_sample(samples: list[Process], workers: list[Thread], graph: ThreadGraph) -> bool:
    """Each worker at the same job line in every sample (a wait seen once may be a passing one)."""
    for worker in workers:
        line = graph.matches[id(worker)].user_frame
        tid = worker.os_thread_id or worker.thread_id
        for sample in samples:
            then = next((t for t in sample.threads if (t.os_thread_id or t.thread_id) == tid), None)
            job = next((f for f in then.frames if not f.native and not is_library(f)), None) if then is not None else None
            if line is None or job is None or (job.function, job.line) != (line.function, line.line):
                return False
    return True


def node_is_decided(b: Builder, key: str) -> bool:
    """The process's reading was already re-pointed or named by an earlier pass."""
    node = b.g.nodes[key]
    return key in b.deciding or (node.pattern is not None and node.pattern not in ("event-wait",))


def _call_queue(thread: Thread) -> str | None:
    for frame in thread.frames:
        if not frame.native and _PROCESS_POOL.search(frame.file) and frame.function.endswith("_process_worker"):
            value = (frame.facts or {}).get("call_queue")
            return value if isinstance(value, str) else "?"
    return None


# What a blocked job waits on when later jobs of the same pool could release it: a queue (a
# multiprocessing or Manager queue), an event, a lock. A job in a socket read, a sleep or a Ray
# call waits on the world outside: the pool may well move.
_POOL_FED = frozenset({"queue-get-wait", "event-wait", "lock-wait", "manager-call-wait"})


def _waits_on_the_pool(b: Builder, child_key: str, thread: Thread) -> bool:
    return any(t is thread and m.pattern in _POOL_FED for t, m in b.verdicts[child_key].threads)


def _running_job(thread: Thread) -> bool:
    """A pool worker process inside a job: frames of the job above `_process_worker`."""
    frames = [f for f in thread.frames if not f.native]
    at = next((i for i, f in enumerate(frames) if _PROCESS_POOL.search(f.file) and f.function.endswith("_process_worker")), None)
    return at is not None and any(not is_library(f) for f in frames[:at])
