"""Thread pools: an executor whose every worker waits on work that only a free worker could run."""

from __future__ import annotations

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.inprocess import (
    ThreadGraph,
    describe,
    is_event_loop,
    name_of,
    pool_of,
    pool_running,
)
from debug_hang.model import Thread


@graph_pass(after=("follow_threads",), decides=("executor-self-wait",))
def detect_pool_self_wait(b: Builder) -> None:
    """A process whose waits go round its thread pool's workers (executor-self-wait).

    Every running worker of one pool waits on a Future; a Future is completed by the job that
    runs it or, for a queued job, by the first worker to come free; the only other things in the
    process that could complete one are idle (an event loop whose coroutines await). Nothing moves.
    """
    for key, found in b.in_process.items():
        if found.end is not None or not found.cycle or any(e.kind != "future" for e in found.cycle):
            continue
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
