"""The wait-for graph's data: nodes, edges, the graph indexed both ways, and its inputs.

Nodes are processes (drivers, actors, task workers, children), actors without a process (dead,
pending), placement groups and resource demands. Every edge comes from evidence and says what is
waited on; a cycle is a deadlock, otherwise chains end at a culprit that waits on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from debug_hang.analyse.crashloop import CrashLoop
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import ProcessVerdict
from debug_hang.libraries import LibraryState
from debug_hang.model import CollectionError, Frame, Process, ProcessRef
from debug_hang.rows import ActorRow, JobRow, PlacementGroupRow, TaskRow
from debug_hang.snapshot import TaskState

# Task states of a call not yet placed on a worker, and of a call queued on a busy actor.
PENDING_SCHED: frozenset[TaskState] = frozenset({"PENDING_NODE_ASSIGNMENT", "PENDING_ARGS_AVAIL"})


QUEUED_STATES: frozenset[TaskState] = frozenset({"SUBMITTED_TO_WORKER", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY"})


# Why an edge waits: the pattern of the wait, or a tie no pattern names (a supervisor and the actors
# it created, Ray Train's barrier and the ranks missing from it, a demand and what holds it, a
# full queue and the creator that never read it, an async actor's await and the processes whose
# later call could resolve it).
EdgeReason = PatternId | Literal["supervises", "train-barrier", "held-by", "never-read", "later-call", "setter-call"]
NodeKind = Literal["actor", "task", "driver", "process", "rank", "placement_group", "resource", "collective"]


NodeState = Literal["blocked", "busy", "idle", "dead", "pending", "restarting", "infeasible", "starved", "unknown"]


@dataclass
class GNode:
    """A vertex of the wait-for graph."""

    key: str
    kind: NodeKind
    name: str
    state: NodeState
    pid: int | None = None
    node_id: str | None = None
    actor_id: str | None = None
    task_id: str | None = None
    class_name: str | None = None
    actor_name: str | None = None  # a named actor's name (ray.remote(...).options(name=...))
    task_name: str | None = None
    rank: int | None = None
    pattern: PatternId | None = None  # what this node is doing / why it is stuck
    frame: Frame | None = None  # the deciding frame, when it comes from a stack
    evidence: list[str] = field(default_factory=list)
    user_frame: Frame | None = None  # the innermost frame of the job's own code on that stack
    lock_wait: Frame | None = None  # another thread of the process waiting at a lock line
    demand: dict[str, float] = field(default_factory=dict)  # what a pending request asks for
    # A socket reader's TCP peers on its node that no Ray call explains (pids), when it has several
    # and which one it reads is not known (sockets.follow_socket_peer): the verdict weighs them.
    peers: list[int] = field(default_factory=list)
    listening: str = ""  # an accept's listening socket, as the probe read it ("port 46769")
    fix_key: str = ""  # which of its pattern's fixes fits (analyse/fixes.py), set by the deciding rule
    release: str = ""  # a wait whose release is scheduled (a threading.Timer, an event loop's timer): how
    # A socket read whose connection still delivers data (bytes received, the last a short while
    # ago: sockets.note_traffic): its peer sends, slowly; the verdict never calls it hung.
    receiving: str = ""

    @property
    def ref(self) -> ProcessRef:
        return ProcessRef(self.node_id, self.pid)

    def label(self) -> str:
        where = f"pid {self.pid}" if self.pid else self.state
        rank = f"[rank {self.rank}]" if self.rank is not None else ""
        named = f' "{self.actor_name[:60]}"' if self.actor_name else ""
        return f"{self.name}{rank}{named} ({where})"


@dataclass
class Edge:
    src: str
    dst: str
    why: EdgeReason  # what is waited on: the wait's pattern id (ray-get-wait, collective-wait, ...)
    evidence: str
    guessed: bool = False  # inferred without a fact naming it (never closes a deadlock cycle)


@dataclass
class WaitGraph:
    """Nodes and wait edges, indexed both ways (graphs of thousands of ranks stay linear)."""

    nodes: dict[str, GNode] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    # by actor_id / task_id; a process with neither (the driver) by its node key
    crash_loops: dict[str, CrashLoop] = field(default_factory=dict)
    # actor node key -> why calls to it wait behind its constructor (its __init__ runs; processes.py)
    constructing: dict[str, str] = field(default_factory=dict)
    # Chain ends moved from a ray.util.queue actor to its consumers (rootcause._chain_ends).
    queue_consumers: set[str] = field(default_factory=set)
    _out: dict[str, list[Edge]] = field(default_factory=dict, repr=False)
    _in: dict[str, list[Edge]] = field(default_factory=dict, repr=False)
    _pair: dict[tuple[str, str], Edge] = field(default_factory=dict, repr=False)  # (src, dst) -> its edge

    def out(self, key: str) -> list[Edge]:
        return self._out.get(key, [])

    def loop_of(self, node: GNode) -> CrashLoop | None:
        """The crash loop of `node`: its actor's or task's, or (a process with neither, the
        driver whose children die and are replaced) the one kept under its node key."""
        return self.crash_loops.get(node.actor_id or node.task_id or node.key)

    def into(self, key: str) -> list[Edge]:
        return self._in.get(key, [])

    def add_edge(self, src: str, dst: str, why: EdgeReason, evidence: str, guessed: bool = False) -> None:
        if src == dst and why != "ray-get-wait":
            return
        same = self._pair.get((src, dst))  # not a scan of out(src): the driver waits on thousands
        if same is not None:
            same.guessed = same.guessed and guessed  # a fact confirms a guess
            # Several calls into one process: keep them all in view (the one waited on may not
            # be the one running), up to a few.
            parts = same.evidence.split("; ")
            if evidence not in parts and len(parts) < 3:
                same.evidence += f"; {evidence}"
            return
        edge = Edge(src, dst, why, evidence, guessed)
        self.edges.append(edge)
        self._pair[src, dst] = edge
        self._out.setdefault(src, []).append(edge)
        self._in.setdefault(dst, []).append(edge)


@dataclass
class TaskIndex:
    """The job's tasks, indexed once by parent task and by actor, so that following each blocked
    process to the calls it made stays linear in the number of tasks (thousands of ranks)."""

    tasks: list[TaskRow]
    by_parent: dict[str, list[int]] = field(default_factory=dict)
    by_actor: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: list[TaskRow]) -> TaskIndex:
        index = cls(tasks)
        for i, task in enumerate(tasks):
            if task.parent_task_id:
                index.by_parent.setdefault(str(task.parent_task_id), []).append(i)
            if task.actor_id:
                index.by_actor.setdefault(str(task.actor_id), []).append(i)
        return index

    def children(self, parents: set[str]) -> list[TaskRow]:
        """Tasks submitted by any of `parents`, in listing order."""
        positions = sorted(i for p in parents for i in self.by_parent.get(p, []))
        return [self.tasks[i] for i in positions]

    def of_actor(self, actor_id: str | None) -> list[TaskRow]:
        """Tasks run by (or calls queued on) one actor, in listing order."""
        return [self.tasks[i] for i in self.by_actor.get(actor_id or "", [])]


@dataclass
class GraphInputs:
    """What the graph is built from: one job's state and the latest stack of each process."""

    job: JobRow
    actors: list[ActorRow]
    tasks: list[TaskRow]
    placement_groups: list[PlacementGroupRow]
    node_totals: list[dict[str, float]]
    verdicts: list[ProcessVerdict]
    available: dict[str, float] | None = None  # cluster-wide free resources, when known
    info: dict[ProcessRef, dict[str, Any]] = field(default_factory=dict)  # per-process evidence read on its node
    jobs: list[JobRow] = field(default_factory=list)  # every job (creators of resource holders)
    now_s: float = 0.0  # when the state was read (epoch seconds): ages of holders
    usage: dict[str, tuple[float, float]] = field(default_factory=dict)  # {resource: (used, total)}, ray status's
    usage_by_node: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # the same, per node id
    status_text: str | None = None  # `ray status` as text
    libraries: LibraryState = field(default_factory=LibraryState)  # Ray Serve's and Ray Data's own state
    samples: dict[ProcessRef, list[Process]] = field(default_factory=dict)  # every sample of each process, oldest first
    dump_errors: list[CollectionError] = field(default_factory=list)  # the dumps that failed (py-spy's errors)
    node_labels: list[dict[str, str]] | None = None  # every alive node's labels; None: not reported
