"""The wait-for graph: from the visible victim to the culprit, across actors, tasks and ranks.

One module per mechanism; each declares its passes (`@graph_pass`: what they read from earlier
passes, the patterns they decide) and its edge handlers (`@follows`: how a node whose pattern has
that catalog `edge` is followed). Importing this package imports every mechanism, and PASSES is
the build's order, computed from the declarations (builder.pass_order).

| module | mechanism |
|---|---|
| model | GNode, Edge, WaitGraph, GraphInputs |
| builder | the Builder every pass shares; pass and handler declarations; build_graph |
| threads | what the threads of one process can do for each other |
| inprocess | who in the same process releases a wait, by the identities of the objects waited on |
| endless | an actor call that never returns (a loop with no exit), waited on or queued behind |
| exits | a process at interpreter exit joining a non-daemon thread that waits forever |
| imports | a thread importing a module that waits on threads waiting for that module's import lock |
| pools | thread pools whose every worker waits on work queued behind it |
| processes | process and actor nodes, crash loops, running and queued calls |
| raycalls | ray.get/ray.wait to the tasks submitted, streams, supervisors, Ray Train's barrier |
| locks | lock order, self-deadlock, library locks held across a wait, OS file locks |
| events | Event/Condition/asyncio waits: who could set them |
| queues | in-process queues and ray.util.queue |
| checkouts | a library pool's checkout (a queue of free connections) to whoever holds a slot |
| queue_threads | a process whose every thread waits, through a queue.Queue or a join, on another of its threads |
| collectives | ranks in collectives: skipped, dead, mismatched peers, members outside the job |
| sockets | socket reads to the process at the other end of the connection (TCP peers on the node) |
| stores | torch.distributed store waits (Store.wait/get): the group's members that could set the key |
| resources | pending and infeasible demands, placement groups, holders |
| children | child processes, pools, pipes |
| loops | a wait on a run_coroutine_threadsafe Future in a process where no thread runs an event loop |
| kernel_objects | a blocking FIFO open to whoever could open the other end; a file lock retried in C (SQLite) to its holder |
| lookups | polls for a named actor (ray.get_actor retried) to whoever could create it |
| setters | an actor's event only a method of its class sets, to the processes whose code calls that method |
| libraries | Ray Serve handles to their replicas, stuck replicas, Ray Data consumers to the stalled operator |
| edges | follow_edges: each node's wait by its catalog edge |
"""

from debug_hang.analyse.graph import (  # noqa: F401 - imported for their declarations
    checkouts,
    children,
    collectives,
    edges,
    endless,
    events,
    exits,
    imports,
    inprocess,
    kernel_objects,
    libraries,
    locks,
    lookups,
    loops,
    pools,
    processes,
    queue_full,
    queue_threads,
    queues,
    raycalls,
    resources,
    setters,
    sockets,
    stores,
)
from debug_hang.analyse.graph.builder import DECLARED, HANDLERS, Builder, GraphPass, build_graph, pass_order
from debug_hang.analyse.graph.model import Edge, GNode, GraphInputs, TaskIndex, WaitGraph
from debug_hang.analyse.graph.threads import proc_key

PASSES: tuple[GraphPass, ...] = pass_order(DECLARED)

__all__ = ["DECLARED", "HANDLERS", "PASSES", "Builder", "Edge", "GNode", "GraphInputs", "GraphPass", "TaskIndex",
           "WaitGraph", "build_graph", "proc_key"]
