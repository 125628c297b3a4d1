"""How each node's wait is followed: the catalog's `edge` of its pattern, one handler each."""

from __future__ import annotations

from debug_hang.analyse.graph.builder import HANDLERS, Builder, follows, graph_pass
from debug_hang.analyse.patterns import catalog
from debug_hang.snapshot import QUEUE_ACTOR_CLASS

# How a blocked process whose own wait is not recognised is followed: to its children, then to
# the calls its running task made (an async actor's awaited calls show no frame of their own).
UNRECOGNISED_EDGE = "child-process"


def edge_of(b: Builder, key: str) -> str:
    """How the wait of one node is followed: the catalog's `edge` of its pattern.

    Ray's own queue actor (ray.util.queue) is followed to the queue's producers or consumers; a
    blocked process whose wait no pattern recognises, as UNRECOGNISED_EDGE.
    """
    node = b.g.nodes[key]
    if node.class_name == QUEUE_ACTOR_CLASS:
        return "queue-producers"
    pattern = catalog().get(node.pattern or "")
    if pattern is not None:
        return pattern.edge
    return UNRECOGNISED_EDGE if node.state in ("blocked", "unknown") else "none"


@graph_pass(after=("index_running_tasks", "detect_file_lock_waits", "attach_serve_callers", "detect_exit_joins",
                   "detect_loop_not_running", "detect_kernel_object_waits"))
def follow_edges(b: Builder) -> None:
    """Each process's wait followed as its catalog pattern's `edge` says (the handler declared
    with @follows for that edge; a test checks every catalog edge has one)."""
    for key in list(b.verdicts):
        handler = HANDLERS.get(edge_of(b, key))
        if handler is not None:
            handler.run(b, key)


# Followed between groups of nodes by their own passes (edges_collectives, edges_train_barrier),
# or waits on nothing another process holds (a root cause, or benign).
@follows("collective-peers", "train-barrier", "none")
def follow_nothing(b: Builder, key: str) -> None:
    """Nothing to follow from this one node."""
