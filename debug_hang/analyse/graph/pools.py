"""Executors: a thread or process pool whose every worker waits on work that only a free worker could run."""

from __future__ import annotations

import re

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
from debug_hang.analyse.graph.threads import frame_text
from debug_hang.analyse.patterns import is_library
from debug_hang.model import ProcessRef, Thread


@graph_pass(after=("follow_threads",), decides=("executor-self-wait",))
def detect_pool_self_wait(b: Builder) -> None:
    """A process whose waits go round its thread pool's workers (executor-self-wait).

    Every running worker of one pool waits on a Future; a Future is completed by the job that
    runs it or, for a queued job, by the first worker to come free; the only other things in the
    process that could complete one are idle (an event loop whose coroutines await). Nothing moves.
    """
    for key in b.verdicts:
        if _process_pool_full(b, key):
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
