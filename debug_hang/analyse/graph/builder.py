"""The state every pass of the graph build shares, and how passes are declared and run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from debug_hang.analyse.capacity import Capacity
from debug_hang.analyse.graph.model import GNode, GraphInputs, TaskIndex, WaitGraph
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import ProcessVerdict
from debug_hang.model import ProcessRef
from debug_hang.rows import ActorRow, TaskRow, calls_into_other_jobs
from debug_hang.snapshot import DRIVER_TASK_PREFIX

if TYPE_CHECKING:
    from debug_hang.analyse.graph.inprocess import Resolution, ThreadGraph
    from debug_hang.model import Thread


@dataclass
class Builder:
    """The state every pass of the graph build shares: inputs, the graph so far, and indexes."""

    inp: GraphInputs
    g: WaitGraph
    actors: dict[str, ActorRow]  # the job's actors, and other jobs' actors it calls
    tasks: list[TaskRow]  # the job's tasks, and its calls into other jobs' actors
    index: TaskIndex
    verdicts: dict[str, ProcessVerdict] = field(default_factory=dict)  # graph key -> stack verdict
    by_pid: dict[ProcessRef, str] = field(default_factory=dict)  # a dumped process -> its key
    actor_node: dict[str, str] = field(default_factory=dict)  # actor id -> key
    running: dict[str, list[TaskRow]] = field(default_factory=dict)  # key -> its RUNNING tasks
    paused: dict[str, list[TaskRow]] = field(default_factory=dict)  # key -> RUNNING calls no thread shows
    file_lock_holders: dict[str, list[str]] = field(default_factory=dict)  # key -> paths of file locks others wait for
    task_loops: dict[str, GNode] = field(default_factory=dict)  # task id -> its crash loop's node (graphed when waited on)
    capacity: Capacity | None = None  # what the nodes and groups have and have free (resources.capacity_of)
    demand_since: dict[str, float] = field(default_factory=dict)  # demand key -> when its first request was made (ms)
    # In-process waits by identity (inprocess.py): each process's thread graph, where its
    # deciding thread's waits lead, and the thread whose reading now stands for the process.
    thread_graphs: dict[str, ThreadGraph] = field(default_factory=dict)
    in_process: dict[str, Resolution] = field(default_factory=dict)
    deciding: dict[str, Thread] = field(default_factory=dict)
    # Actors whose waited event a FINISHED call set on another object (events.py): key -> that call.
    set_elsewhere: dict[str, str] = field(default_factory=dict)
    # Processes whose deciding thread reads an empty pipe (kernel_objects.py): key -> (the
    # thread, the probe's `pipe_reads` entry: the pipe and the pids holding its write end).
    pipe_reads: dict[str, tuple[Thread, dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def start(cls, inp: GraphInputs) -> Builder:
        job_id = inp.job.job_id
        foreign = calls_into_other_jobs(job_id, inp.tasks)  # calls into other jobs' (detached) actors
        called = {t.actor_id for t in foreign}
        actors = {a.actor_id: a for a in inp.actors if a.job_id == job_id or a.actor_id in called}
        tasks = [t for t in inp.tasks if t.job_id == job_id] + foreign
        return cls(inp=inp, g=WaitGraph(), actors=actors, tasks=tasks, index=TaskIndex.of(tasks))

    @property
    def job_id(self) -> str | None:
        return self.inp.job.job_id

    def own_calls(self, key: str) -> set[str]:
        """Ids of the tasks a process runs (the driver's own task id included): parents of its calls."""
        own = {str(t.task_id) for t in self.running.get(key, []) if t.task_id}
        verdict = self.verdicts.get(key)
        if verdict is not None and verdict.process.role == "driver":
            own.add(DRIVER_TASK_PREFIX + str(self.job_id))
        return own


PassFn = Callable[[Builder], None]


@dataclass(frozen=True)
class GraphPass:
    """One pass of the build: the passes whose findings it reads (they run before it) and the
    catalog patterns whose rule it holds (no other pass decides them)."""

    run: PassFn
    after: tuple[str, ...]
    decides: frozenset[PatternId]

    @property
    def name(self) -> str:
        return self.run.__name__


# Every declared pass, by name (filled as the mechanism modules are imported).
DECLARED: dict[str, GraphPass] = {}


def graph_pass(*, after: tuple[str, ...] = (), decides: tuple[PatternId, ...] = ()) -> Callable[[PassFn], PassFn]:
    """Declare a pass: `after` names the passes it reads from (or whose edges and evidence lines
    come before its own in a report: order shows there), `decides` the patterns whose rule it holds."""
    def register(fn: PassFn) -> PassFn:
        if fn.__name__ in DECLARED:
            raise ValueError(f"graph pass {fn.__name__} declared twice")
        DECLARED[fn.__name__] = GraphPass(fn, tuple(after), frozenset(decides))
        return fn
    return register


HandlerFn = Callable[[Builder, str], None]


@dataclass(frozen=True)
class EdgeHandler:
    """How one node's wait is followed, for a catalog `edge` (run by the follow_edges pass), and
    the patterns whose rule it holds."""

    edge: str
    run: HandlerFn
    decides: frozenset[PatternId]


# Every catalog edge's handler, by edge (filled as the mechanism modules are imported).
HANDLERS: dict[str, EdgeHandler] = {}


def follows(*edges: str, decides: tuple[PatternId, ...] = ()) -> Callable[[HandlerFn], HandlerFn]:
    """Declare the handler of catalog edge(s) and the patterns it decides."""
    def register(fn: HandlerFn) -> HandlerFn:
        for edge in edges:
            if edge in HANDLERS:
                raise ValueError(f"edge {edge} has two handlers: {HANDLERS[edge].run.__name__}, {fn.__name__}")
            HANDLERS[edge] = EdgeHandler(edge, fn, frozenset(decides))
        return fn
    return register


def pass_order(passes: dict[str, GraphPass]) -> tuple[GraphPass, ...]:
    """The passes in an order where each runs after those it names in `after` (Kahn's algorithm;
    among passes ready at once, by name, so the order depends on the declarations only)."""
    missing = {a for p in passes.values() for a in p.after if a not in passes}
    if missing:
        raise ValueError(f"graph passes named in `after` but not declared: {sorted(missing)}")
    waiting = {name: set(p.after) for name, p in passes.items()}
    order: list[GraphPass] = []
    while waiting:
        ready = sorted(name for name, needs in waiting.items() if not needs)
        if not ready:
            raise ValueError(f"graph passes wait on each other: {sorted(waiting)}")
        name = ready[0]
        order.append(passes[name])
        del waiting[name]
        for needs in waiting.values():
            needs.discard(name)
    return tuple(order)


def build_graph(inp: GraphInputs) -> WaitGraph:
    """Build the wait-for graph for one job: every declared pass, in pass_order, over one Builder."""
    from debug_hang.analyse.graph import PASSES  # the package imports every mechanism module

    b = Builder.start(inp)
    for step in PASSES:
        step.run(b)
    return b.g
