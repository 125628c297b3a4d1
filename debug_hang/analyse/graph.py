"""The wait-for graph: from the visible victim to the culprit, across actors, tasks and ranks.

Nodes are processes (drivers, actors, task workers, children), actors without a process (dead,
pending), placement groups and resource demands. Every edge comes from evidence: a thread in
`ray.get` → the unfinished tasks its running task submitted (`parent_task_id`) → the actor or
worker running them; a rank in a collective → the peers not in it; a pending task → the
resource it needs; and so on. A cycle is a deadlock; otherwise chains end at a culprit that
waits on nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from debug_hang.analyse.crashloop import CrashLoop, find_crash_loops
from debug_hang.analyse.holders import Holder, bundle_total, idle_actors, leaked_placement_groups, status_reserved_line
from debug_hang.analyse.patterns import ProcessVerdict, catalog, is_library, settings
from debug_hang.model import Frame, Process, ProcessRef, Thread
from debug_hang.snapshot import (
    BARRIER_TASK,
    DONE_STATES,
    DRIVER_TASK_PREFIX,
    POLLING_TASKS,
    QUEUE_ACTOR_CLASS,
    WORKER_CLASS,
    TaskState,
    calls_into_other_jobs,
    rank_env,
)

# Task states of a call not yet placed on a worker, and of a call queued on a busy actor.
PENDING_SCHED: frozenset[TaskState] = frozenset({"PENDING_NODE_ASSIGNMENT", "PENDING_ARGS_AVAIL"})
QUEUED_STATES: frozenset[TaskState] = frozenset({"SUBMITTED_TO_WORKER", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY"})
NodeKind = Literal["actor", "task", "driver", "process", "rank", "placement_group", "resource"]
NodeState = Literal["blocked", "busy", "idle", "dead", "pending", "restarting", "infeasible", "starved", "unknown"]
_PROCESS_STATE: dict[str, NodeState] = {"blocked": "blocked", "busy": "busy", "idle": "idle"}
_ROLE_KIND: dict[str, NodeKind] = {"driver": "driver", "actor": "actor", "task": "task"}
_RANK_IN_NAME = re.compile(r"rank[-_ ]?(\d+)", re.IGNORECASE)


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
    pattern: str | None = None  # what this node is doing / why it is stuck
    frame: Frame | None = None  # the deciding frame, when it comes from a stack
    evidence: list[str] = field(default_factory=list)
    user_frame: Frame | None = None  # the innermost frame of the job's own code on that stack
    lock_wait: Frame | None = None  # another thread of the process waiting at a lock line
    demand: dict[str, float] = field(default_factory=dict)  # what a pending request asks for

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
    why: str  # pattern id of the wait (ray-get-wait, collective-wait, ...)
    evidence: str


@dataclass
class WaitGraph:
    """Nodes and wait edges, indexed both ways (graphs of thousands of ranks stay linear)."""

    nodes: dict[str, GNode] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    crash_loops: dict[str, CrashLoop] = field(default_factory=dict)  # by actor_id / task_id
    _out: dict[str, list[Edge]] = field(default_factory=dict, repr=False)
    _in: dict[str, list[Edge]] = field(default_factory=dict, repr=False)
    _pair: dict[tuple[str, str], Edge] = field(default_factory=dict, repr=False)  # (src, dst) -> its edge

    def out(self, key: str) -> list[Edge]:
        return self._out.get(key, [])

    def into(self, key: str) -> list[Edge]:
        return self._in.get(key, [])

    def add_edge(self, src: str, dst: str, why: str, evidence: str) -> None:
        if src == dst and why != "ray-get-wait":
            return
        same = self._pair.get((src, dst))  # not a scan of out(src): the driver waits on thousands
        if same is not None:
            # Several calls into one process: keep them all in view (the one waited on may not
            # be the one running), up to a few.
            parts = same.evidence.split("; ")
            if evidence not in parts and len(parts) < 3:
                same.evidence += f"; {evidence}"
            return
        edge = Edge(src, dst, why, evidence)
        self.edges.append(edge)
        self._pair[src, dst] = edge
        self._out.setdefault(src, []).append(edge)
        self._in.setdefault(dst, []).append(edge)


@dataclass
class TaskIndex:
    """The job's tasks, indexed once by parent task and by actor, so that following each blocked
    process to the calls it made stays linear in the number of tasks (thousands of ranks)."""

    tasks: list[dict[str, Any]]
    by_parent: dict[str, list[int]] = field(default_factory=dict)
    by_actor: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: list[dict[str, Any]]) -> TaskIndex:
        index = cls(tasks)
        for i, task in enumerate(tasks):
            if task.get("parent_task_id"):
                index.by_parent.setdefault(str(task["parent_task_id"]), []).append(i)
            if task.get("actor_id"):
                index.by_actor.setdefault(str(task["actor_id"]), []).append(i)
        return index

    def children(self, parents: set[str]) -> list[dict[str, Any]]:
        """Tasks submitted by any of `parents`, in listing order."""
        positions = sorted(i for p in parents for i in self.by_parent.get(p, []))
        return [self.tasks[i] for i in positions]

    def of_actor(self, actor_id: str | None) -> list[dict[str, Any]]:
        """Tasks run by (or calls queued on) one actor, in listing order."""
        return [self.tasks[i] for i in self.by_actor.get(actor_id or "", [])]


@dataclass
class GraphInputs:
    """What the graph is built from: one job's state and the latest stack of each process."""

    job: dict[str, Any]
    actors: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    placement_groups: list[dict[str, Any]]
    node_totals: list[dict[str, float]]
    verdicts: list[ProcessVerdict]
    available: dict[str, float] | None = None  # cluster-wide free resources, when known
    info: dict[ProcessRef, dict[str, Any]] = field(default_factory=dict)  # per-process evidence read on its node
    jobs: list[dict[str, Any]] = field(default_factory=list)  # every job (creators of resource holders)
    now_s: float = 0.0  # when the state was read (epoch seconds): ages of holders
    usage: dict[str, tuple[float, float]] = field(default_factory=dict)  # {resource: (used, total)}, ray status's
    status_text: str | None = None  # `ray status` as text


def _deciding_thread(verdict: ProcessVerdict) -> Thread | None:
    """The thread whose stack decided the process's reading."""
    return next((t for t, m in verdict.threads if m is verdict.main), None)


def other_threads_in_job_code(verdict: ProcessVerdict, thread: Thread | None) -> list[Thread]:
    """The process's other threads that could hold a lock, set an event or fill a queue `thread`
    waits on: those running the job's own code, and library threads blocked in a wait that leads
    somewhere (ray.get, a collective, a lock: alive, and part of the work). Known housekeeping
    loops and library threads merely idle on a queue or event are not."""
    cat = catalog()
    return [t for t, m in verdict.threads if t is not thread
            and (any(not is_library(f) for f in t.frames if not f.native)
                 or (m.pattern in cat and cat[m.pattern].kind != "benign" and m.pattern not in _IDLE_READINGS))]


# Readings of a library thread that is idle on its own queue or event (a feeder, a logger thread).
_IDLE_READINGS = frozenset({"event-wait", "queue-get-wait"})


def proc_key(proc: Process) -> str:
    return proc.ref.key


def _frame_text(frame: Frame | None) -> str:
    if frame is None:
        return "?"
    where = f"{frame.short_file}:{frame.line}" if frame.line else frame.short_file
    code = f" `{frame.code}`" if frame.code else ""
    return f"{frame.function} ({where}){code}"


def _rank_of(proc: Process | None, actor: dict[str, Any] | None) -> int | None:
    """A rank from evidence: the process environment, the actor's runtime_env env_vars, its name."""
    if proc is not None and proc.rank is not None:
        return proc.rank
    actor = actor or {}
    env = rank_env(actor)
    if str(env.get("RANK", "")).isdigit():
        return int(env["RANK"])
    name = actor.get("name") or actor.get("repr_name") or ""
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


@dataclass
class Builder:
    """The state every pass of the graph build shares: inputs, the graph so far, and indexes."""

    inp: GraphInputs
    g: WaitGraph
    actors: dict[str, dict[str, Any]]  # the job's actors, and other jobs' actors it calls
    tasks: list[dict[str, Any]]  # the job's tasks, and its calls into other jobs' actors
    index: TaskIndex
    verdicts: dict[str, ProcessVerdict] = field(default_factory=dict)  # graph key -> stack verdict
    by_pid: dict[ProcessRef, str] = field(default_factory=dict)  # a dumped process -> its key
    actor_node: dict[str, str] = field(default_factory=dict)  # actor id -> key
    running: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # key -> its RUNNING tasks
    paused: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # key -> RUNNING calls no thread shows

    @classmethod
    def start(cls, inp: GraphInputs) -> Builder:
        job_id = inp.job.get("job_id")
        foreign = calls_into_other_jobs(job_id, inp.tasks)  # calls into other jobs' (detached) actors
        called = {t.get("actor_id") for t in foreign}
        actors = {a["actor_id"]: a for a in inp.actors if a.get("job_id") == job_id or a.get("actor_id") in called}
        tasks = [t for t in inp.tasks if t.get("job_id") == job_id] + foreign
        return cls(inp=inp, g=WaitGraph(), actors=actors, tasks=tasks, index=TaskIndex.of(tasks))

    @property
    def job_id(self) -> str | None:
        return self.inp.job.get("job_id")

    def own_calls(self, key: str) -> set[str]:
        """Ids of the tasks a process runs (the driver's own task id included): parents of its calls."""
        own = {str(t["task_id"]) for t in self.running.get(key, []) if t.get("task_id")}
        verdict = self.verdicts.get(key)
        if verdict is not None and verdict.process.role == "driver":
            own.add(DRIVER_TASK_PREFIX + str(self.job_id))
        return own


Pass = Callable[[Builder], None]


def build_graph(inp: GraphInputs) -> WaitGraph:
    """Build the wait-for graph for one job: each pass of PASSES, in order, over one Builder."""
    b = Builder.start(inp)
    for step in PASSES:
        step(b)
    return b.g


def add_process_nodes(b: Builder) -> None:
    """One node per dumped process, with its stack's reading as pattern and evidence."""
    for verdict in b.inp.verdicts:
        node = _process_node(b, verdict)
        b.g.nodes[node.key] = node
        b.verdicts[node.key] = verdict
        b.by_pid[verdict.process.ref] = node.key
        if verdict.process.actor_id:
            b.actor_node[verdict.process.actor_id] = node.key


def _process_node(b: Builder, verdict: ProcessVerdict) -> GNode:
    proc = verdict.process
    actor = b.actors.get(proc.actor_id or "")
    kind: NodeKind = _ROLE_KIND.get(proc.role or "", "process")
    name = proc.actor_class or proc.task_name or (proc.title or f"pid {proc.pid}")
    if proc.role == "driver":
        name = f"driver ({(proc.title or '').strip()[:60]})"
    rank = _rank_of(proc, actor)
    node = GNode(
        key=proc_key(proc), kind="rank" if rank is not None else kind, name=name, pid=proc.pid,
        node_id=proc.node_id, actor_id=proc.actor_id, task_id=proc.task_id, class_name=proc.actor_class,
        actor_name=proc.actor_name or (actor or {}).get("name") or None, task_name=proc.task_name, rank=rank,
        state=_PROCESS_STATE.get(verdict.verdict, "unknown"),
        pattern=verdict.pattern if verdict.pattern != "unknown" else None,
        frame=verdict.main.frame if verdict.main else None,
        user_frame=verdict.main.user_frame if verdict.main else None,
    )
    if verdict.main and verdict.main.frame is not None and verdict.verdict != "idle":
        where = verdict.main.user_frame or verdict.main.frame
        node.evidence.append(f"stack: {verdict.main.pattern} at {_frame_text(where)}")
    _note_lock_across_call(node, verdict)
    cpu = b.inp.info.get(proc.ref, {}).get("cpu_percent")
    if cpu is not None and (verdict.verdict == "busy" or cpu >= settings().cpu_evidence_percent):
        node.evidence.append(f"real CPU use {cpu:.0f}% over the sampling window")
    return node


def _note_lock_across_call(node: GNode, verdict: ProcessVerdict) -> None:
    """One thread in ray.get, another at a lock line: the remote call is what leads on (the lock is
    likely held across it), so the process is followed through its ray.get."""
    getter = next((m for _t, m in verdict.threads if m.pattern == "ray-get-wait"), None)
    locked = next((m for _t, m in verdict.threads if m.pattern == "lock-wait"), None)
    if verdict.pattern not in ("ray-get-wait", "lock-wait") or getter is None or locked is None:
        return
    node.pattern, node.frame, node.user_frame = "ray-get-wait", getter.frame, getter.user_frame
    node.lock_wait = locked.user_frame or locked.frame
    node.evidence.append(f"another thread waits for a lock at {_frame_text(node.lock_wait)}, while this "
                         "one is in ray.get: a lock held across a remote call?")


def add_actor_nodes(b: Builder) -> None:
    """A node for each dead or pending actor of the job (no process to dump)."""
    for actor_id, actor in b.actors.items():
        state = actor.get("state")
        if actor_id in b.actor_node or state == "ALIVE":
            continue  # dumped, or alive but not dumped (reported as a collection error)
        node = GNode(
            key=f"actor:{actor_id}", kind="actor", name=str(actor.get("class_name")),
            state="dead" if state == "DEAD" else "pending", actor_id=actor_id,
            class_name=actor.get("class_name"), actor_name=actor.get("name") or None, node_id=actor.get("node_id"),
            pid=int(actor.get("pid") or 0) or None,
        )
        node.rank = _rank_of(None, actor)
        if state == "DEAD":
            node.evidence.append(f"actor DEAD: {_death_text(actor.get('death_cause'))}")
        else:
            node.evidence.append(f"actor {state}, required resources {actor.get('required_resources')}")
        b.g.nodes[node.key] = node
        b.actor_node[actor_id] = node.key


def mark_crash_loops(b: Builder) -> None:
    """Actors restarted (tasks retried) after each death: not "starting", a crash loop (crashloop.py).
    A task's loop gets its node when a waiter follows it (_node_for_task)."""
    b.g.crash_loops = find_crash_loops(list(b.actors.values()), b.tasks)
    for loop in b.g.crash_loops.values():
        if loop.kind == "actor" and loop.id in b.actor_node:
            _mark_crash_loop(b.g.nodes[b.actor_node[loop.id]], loop)


def _mark_crash_loop(node: GNode, loop: CrashLoop) -> None:
    """It ran and died, and is restarted (retried): a crash loop once the rules' count is reached."""
    node.pattern, node.state = ("crash-loop" if loop.confirmed else None), "restarting"
    node.evidence.append(loop.text())


def index_running_tasks(b: Builder) -> None:
    """The RUNNING calls of each dumped process; a call that no thread shows is not idleness."""
    for task in b.tasks:
        if task.get("state") == "RUNNING" and task.get("worker_pid"):
            key = b.by_pid.get(ProcessRef(task.get("node_id"), int(task["worker_pid"])))
            if key:
                b.running.setdefault(key, []).append(task)
    for key, running in b.running.items():
        node = b.g.nodes[key]
        calls = [t for t in running if t.get("name") not in POLLING_TASKS]
        if node.state == "idle" and calls:
            # The State API says a call runs here, yet no thread shows it: a generator paused by
            # backpressure (num_returns="streaming") until its consumer reads on, or a call caught
            # between two frames. Not an idle actor.
            node.state, node.pattern = "unknown", None
            b.paused[key] = calls
            node.evidence.append(f"{', '.join(sorted({str(t.get('name')) for t in calls}))} RUNNING here, but no thread "
                                 "runs it: a streaming generator paused until its consumer reads more, or a call "
                                 "between frames (dump again with --samples 5)")


def add_last_calls(b: Builder) -> None:
    """Record each actor's last finished/failed call as evidence (a rank that finished early)."""
    last: dict[str, dict[str, Any]] = {}
    for task in b.tasks:
        aid = task.get("actor_id")
        if not aid or task.get("state") not in DONE_STATES or task.get("type") != "ACTOR_TASK" or task.get("name") in POLLING_TASKS:
            continue
        if aid not in last or (task.get("end_time_ms") or 0) > (last[aid].get("end_time_ms") or 0):
            last[aid] = task
    for aid, task in last.items():
        key = b.actor_node.get(aid)
        if key is None:
            continue
        text = f"last finished call: {task.get('name')} {task.get('state')}"
        if task.get("state") == "FAILED":
            err = (task.get("error_message") or "").strip().splitlines()
            text += f" ({task.get('error_type')}: {err[-1][:200] if err else ''})"
        b.g.nodes[key].evidence.append(text)


def detect_lock_waits(b: Builder) -> None:
    """Lock waits read across the threads of one process: lock order, or a lock nobody else holds."""
    for key, verdict in b.verdicts.items():
        if _detect_known_holder(b.g.nodes[key], verdict):
            continue
        _detect_lock_order(b.g.nodes[key], verdict)
        _detect_lock_self(b.g.nodes[key], verdict)


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


def follow_edges(b: Builder) -> None:
    """Each process's wait followed as its catalog pattern's `edge` says (EDGE_HANDLERS)."""
    for key in list(b.verdicts):
        handler = EDGE_HANDLERS.get(edge_of(b, key))
        if handler is not None:
            handler(b, key)


def follow_submitted(b: Builder, key: str) -> None:
    """A thread in ray.get / ray.wait / an awaited call: the unfinished tasks it submitted."""
    proc = b.verdicts[key].process
    found = _edges_from_parents(b, key, b.own_calls(key))
    if not found and proc.actor_id:
        # A thread the actor started itself submits with whatever task its main thread ran last
        # as parent (Ray Train's training thread: a finished status poll), so any task of this
        # actor may be the parent of what it waits for.
        own_ids = {str(t["task_id"]) for t in b.index.of_actor(proc.actor_id) if t.get("task_id")}
        found = _edges_from_parents(b, key, own_ids)
    mine = b.running.get(key, [])
    if not found and mine and b.g.nodes[key].pattern == "ray-get-wait":
        # It waits on objects it did not create: ObjectRefs handed to it by its caller, whose
        # other unfinished tasks are the likely producers.
        callers = {str(t.get("parent_task_id")) for t in mine}
        _edges_from_parents(b, key, callers, skip={str(t.get("task_id")) for t in mine},
                            text="probably waits for {name} ({state}), started by its caller (an ObjectRef passed in)")


def follow_own_calls(b: Builder, key: str) -> None:
    """A sleep loop around ray.wait(timeout=...) polls the calls it made: a wait on them."""
    node = b.g.nodes[key]
    if _edges_from_parents(b, key, b.own_calls(key)):
        node.pattern = "ray-get-wait"
        node.evidence.append("polls in a sleep loop while calls it made are unfinished: it waits for them")


def follow_placement_group(b: Builder, key: str) -> None:
    """A thread in pg.ready(): the job's PENDING placement groups."""
    for pg in b.inp.placement_groups:
        if pg.get("creator_job_id") not in (b.job_id, None) or pg.get("state") != "PENDING":
            continue
        pg_key = _pg_node(b.g, pg, b.inp.node_totals)
        if b.g.nodes[pg_key].class_name is None:
            b.g.nodes[pg_key].class_name = b.g.nodes[key].class_name  # who waits for it
        b.g.add_edge(key, pg_key, "pg-ready-wait", "waits in pg.ready() for this placement group")


def follow_children(b: Builder, key: str) -> None:
    """A process waiting on its child processes; an unrecognised wait of an actor with a running
    call is followed to that call's unfinished tasks too (an async actor awaiting its own calls)."""
    node = b.g.nodes[key]
    proc = b.verdicts[key].process
    if _pool_task_lost(b, key):
        return
    _edges_children(b, key, proc)
    if node.pattern is None and proc.actor_id and b.running.get(key):
        # An async actor awaiting the calls it made shows only an idle event loop: its running
        # task's unfinished calls are what it waits for.
        follow_submitted(b, key)
        if b.g.out(key):
            node.state = "blocked"
            node.evidence.append("awaits the calls it made (an async actor: its own stack shows only an idle event loop)")


def follow_queue(b: Builder, key: str) -> None:
    """A queue wait: an in-process queue.Queue is filled by threads of this process; a
    ray.util.queue by other actors."""
    if _in_process_queue(b.verdicts[key]):
        _check_in_process_producer(b.g.nodes[key], b.verdicts[key])
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


def follow_nothing(b: Builder, key: str) -> None:
    """The pattern waits on nothing another process holds (a root cause, or benign)."""


def follow_lock_holder(b: Builder, key: str) -> None:
    """A wait for an OS file lock: to the process /proc/locks names as its holder (same node)."""
    _edges_file_locks_of(b, key)



# edge (catalog) -> how one node's wait is followed. Edges between groups of nodes are their own
# passes (GROUP_EDGES). A test checks both cover the catalog's edges exactly.
EDGE_HANDLERS: dict[str, Callable[[Builder, str], None]] = {
    "submitted-tasks": follow_submitted,
    "own-calls": follow_own_calls,
    "placement-group": follow_placement_group,
    "child-process": follow_children,
    "queue-producers": follow_queue,
    "collective-peers": follow_nothing,  # followed between ranks by edges_collectives
    "train-barrier": follow_nothing,  # followed by edges_train_barrier
    "lock-holder": follow_lock_holder,
    "none": follow_nothing,
}


def detect_async_await(b: Builder) -> None:
    """Async actors awaiting an in-process asyncio object nobody resolves (async-await-stuck)."""
    for key, verdict in b.verdicts.items():
        _detect_async_await(b.g, key, verdict, b.running)


def _detect_async_await(g: WaitGraph, key: str, verdict: ProcessVerdict, running: dict[str, list[dict[str, Any]]]) -> None:
    """An async actor that others wait on, whose method runs but whose loop is idle and which
    awaits no Ray call: it awaits an in-process asyncio object nobody resolves."""
    node = g.nodes[key]
    if node.pattern is not None or not running.get(key) or g.out(key) or not g.into(key):
        return
    loops = [t for t, _m in verdict.threads if any(f.function.endswith("run_forever") and "asyncio" in f.file for f in t.frames)]
    if not loops:
        return
    node.pattern, node.state = "async-await-stuck", "blocked"
    doing = ", ".join(sorted({str(t.get("name")) for t in running[key]}))
    node.evidence.append(f"{doing} RUNNING, its event loop idle and no Ray call of it unfinished: it awaits an asyncio "
                         "object of this actor (Event, Queue, Future, Lock) that nothing resolves")


def _detect_known_holder(node: GNode, verdict: ProcessVerdict) -> bool:
    """A library lock whose holders the catalog knows (a graph pattern with `holds`): one thread
    waits for it at the pattern's frames while another thread of the process is inside a frame
    that holds it, itself blocked: the lock is held across that wait (logging-lock-deadlock)."""
    for pattern in catalog().values():
        if not pattern.holds or pattern.detect != "graph":
            continue
        waiter = next(((t, f) for t, _m in verdict.threads for f in t.frames
                       if not f.native and any(r.matches(f) for r in pattern.frames)), None)
        if waiter is None:
            continue
        holder = next(((t, m, f) for t, m in verdict.threads if t is not waiter[0] for f in t.frames
                       if not f.native and any(r.matches(f) for r in pattern.holds)), None)
        if holder is None:
            continue
        thread, match, frame = holder
        node.pattern, node.state = pattern.id, "blocked"
        node.frame, node.user_frame = waiter[1], None
        node.evidence.append(f"thread {waiter[0].name or waiter[0].os_thread_id} waits for the lock at "
                             f"{_frame_text(waiter[1])}")
        node.evidence.append(f"thread {thread.name or thread.os_thread_id} holds it: it is inside {_frame_text(frame)}, "
                             f"which keeps it taken, and waits at {_frame_text(match.frame)}"
                             + (f" ({match.pattern})" if match.pattern != "unknown" else ""))
        return True
    return False


def _detect_lock_order(node: GNode, verdict: ProcessVerdict) -> None:
    """Two or more threads of one process idle at different lock lines: a lock-order deadlock."""
    waits = [(t, m) for t, m in verdict.threads if m.pattern == "lock-wait" and m.frame is not None and not t.active]
    lines = {(m.frame.file, m.frame.line) for _, m in waits if m.frame is not None}
    if len(waits) < 2 or len(lines) < 2:
        return
    node.pattern = "lock-order-deadlock"
    node.state = "blocked"
    for thread, match in waits[:4]:
        frame = match.user_frame or match.frame
        node.evidence.append(f"thread {thread.name or thread.os_thread_id} waits at {_frame_text(frame)}")


# Functions run as finalisers: by the garbage collector or when a last reference is dropped.
_FINALISER = re.compile(r"(__del__|finaliz|_callback|callback)$|weakref")


def _detect_lock_self(node: GNode, verdict: ProcessVerdict) -> None:
    """One thread waits to take a lock and no other thread of the process runs job code: nobody
    else can hold it — the waiting thread holds it itself (re-entry from __del__ or a callback),
    or a thread ended without releasing it. A forked child is left to _edges_children (there
    the lock was copied locked by fork)."""
    if node.pattern != "lock-wait" or verdict.main is None or verdict.process.role == "child":
        return
    frame = verdict.main.frame  # a lock-wait reading: a lock take (its `with`/acquire line, or a library's lock by name)
    if frame is None:
        return
    waiter = _deciding_thread(verdict)
    if waiter is None:
        return
    others = other_threads_in_job_code(verdict, waiter)
    if others:
        return
    node.pattern = "lock-self-deadlock"
    node.state = "blocked"
    frames = [f for f in waiter.frames if not f.native]
    at = next((i for i, f in enumerate(frames) if f is frame), 0)
    caller = next((f for f in frames[at + 1:] if not is_library(f)), None)
    node.evidence.append(
        f"thread {waiter.name or waiter.os_thread_id} waits to take the lock at {_frame_text(frame)}, and no other "
        "thread of this process runs job code: nobody else can hold it — this thread holds it itself "
        "further up its stack (threading.Lock is not reentrant), or a thread ended without releasing it")
    finaliser = next((f for f in frames[at:] if _FINALISER.search(f.function)), None)
    if finaliser is not None and finaliser is not frame:
        below = frames[frames.index(finaliser) + 1] if frames.index(finaliser) + 1 < len(frames) else None
        node.evidence.append(
            f"the wait is reached from {finaliser.function} ({_frame_text(finaliser)}), a finaliser this thread ran "
            f"in the middle of {_frame_text(below) if below else 'its work'} (a dropped last reference or a garbage "
            "collection pass): that frame holds the lock the finaliser now waits for")
    elif finaliser is not None:
        node.evidence.append(
            f"the wait is inside {frame.function}, run by this thread when "
            + (f"{_frame_text(caller)} dropped the last reference" if caller else "the last reference was dropped")
            + "; that frame (or one below it) is the only place the lock can be held")
    elif caller is not None:
        node.evidence.append(f"called from {_frame_text(caller)}: check whether that frame already holds the lock")


def detect_event_waits(b: Builder) -> None:
    """Event/Condition waits that nothing can signal (event-setter-queued, event-never-set)."""
    for key, verdict in b.verdicts.items():
        _detect_event_wait(b.g, key, verdict, b.index, b.running)
        if b.g.nodes[key].pattern == "event-never-set":
            _event_set_by_paused_generator(b, key)


def _detect_event_wait(g: WaitGraph, key: str, verdict: ProcessVerdict, index: TaskIndex,
                       running: dict[str, list[dict[str, Any]]]) -> None:
    """A thread in Event.wait / Condition.wait that waits on no Ray work: who could signal it?

    Calls queued on the same actor behind the waiting method cannot run before it returns
    (event-setter-queued); with no queued call and no other thread in job code, nothing in the
    process will set it (event-never-set). A live thread in job code may still: left a symptom.
    """
    node = g.nodes[key]
    if node.pattern != "event-wait" or verdict.main is None or g.out(key):
        return
    where = _frame_text(verdict.main.user_frame or verdict.main.frame)
    doing = ", ".join(sorted({str(t.get("name")) for t in running.get(key, [])})) or "its current call"
    queued = [t for t in index.of_actor(node.actor_id) if t.get("state") in QUEUED_STATES and not t.get("worker_pid")]
    if queued:
        node.pattern, node.state = "event-setter-queued", "blocked"
        names = ", ".join(sorted({str(t.get("name")) for t in queued}))
        node.evidence.append(f"waits at {where} inside {doing}, while {len(queued)} call(s) to this actor are queued "
                             f"behind it ({names}): they cannot start until it returns, so none of them can signal it")
        return
    waiter = _deciding_thread(verdict)
    others = [t for t in other_threads_in_job_code(verdict, waiter) if not _cannot_signal(t, verdict.main.user_frame)]
    if others:
        return
    node.pattern, node.state = "event-never-set", "blocked"
    node.evidence.append(f"waits at {where} inside {doing}; no other thread of this process runs job code, no call to it "
                         "is queued and it waits on no Ray task: nothing here will set it (a setter thread that died "
                         "leaves its traceback in this worker's .err log)")


_STREAM_READER = re.compile(r"ray/_private/object_ref_generator\.py$")
_RAY_WAIT = re.compile(r"ray/_private/worker\.py$")
_CALLS_WAIT = re.compile(r"\bwait\s*\(")


def _reads_stream(thread: Thread | None) -> bool:
    """The thread iterates an ObjectRefGenerator: inside Ray's Python generator (Ray 2.4x+), or,
    where Ray compiles the generator (2.9 to 2.3x: no frame of its own), in Ray's `wait` right
    under a job frame whose line makes no `wait(` call (`for ref in stream:`, `next(stream)`)."""
    if thread is None:
        return False
    if any(_STREAM_READER.search(f.file) for f in thread.frames):
        return True
    frames = [f for f in thread.frames if not f.native]
    inner = next((i for i, f in enumerate(frames) if _RAY_WAIT.search(f.file) and f.function.rsplit(".", 1)[-1] == "wait"), None)
    if inner is None:
        return False
    job = next((f for f in frames[inner + 1:] if not is_library(f)), None)
    return job is not None and bool(job.code) and not _CALLS_WAIT.search(job.code or "")


def mark_stream_pacing(b: Builder) -> None:
    """A sleep loop in a task whose submitter reads a stream (stream-paced-producer).

    A consumer iterating an ObjectRefGenerator waits for the next item of a generator task it
    submitted; a generator that sleeps between yields (a simulator, a rate limit) shows the same
    sleep in every sample, and no task finishes until the stream ends: its items are progress the
    State API does not show, and one sleep may outlast the window. Read as pacing, not as a poll
    that never ends.
    """
    for key, verdict in b.verdicts.items():
        if not _reads_stream(_deciding_thread(verdict)):
            continue
        for edge in b.g.out(key):
            node = b.g.nodes[edge.dst]
            if node.pattern == "poll-never-satisfied" and node.kind == "task":
                node.pattern = "stream-paced-producer"
                main = verdict.main
                node.evidence.append(
                    f"{b.g.nodes[key].label()} is reading a stream (ObjectRefGenerator) at "
                    f"{_frame_text(main.user_frame if main else None)}: this task sleeps "
                    "between the items it yields; each item is progress no task state shows")


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
    reach = _reachable_from(g, key)
    for gen_key, calls in b.paused.items():
        parents = {str(t.get("parent_task_id")) for t in calls}
        for consumer in (k for k in b.verdicts if k != gen_key and b.own_calls(k) & parents):
            main = b.verdicts[consumer].main
            thread = _deciding_thread(b.verdicts[consumer])
            reading = _reads_stream(thread)
            if main is None or reading or key not in _reachable_from(g, consumer) or gen_key in reach:
                continue
            names = ", ".join(sorted({str(t.get("name")) for t in calls}))
            where = _frame_text(main.user_frame or main.frame)
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


def _reachable_from(g: WaitGraph, start: str) -> set[str]:
    """Every node `start` waits on, directly or down a chain."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for e in g.out(todo.pop()):
            if e.dst not in seen:
                seen.add(e.dst)
                todo.append(e.dst)
    return seen


def _cannot_signal(thread: Thread, waited_at: Frame | None) -> bool:
    """A thread that cannot set the event another thread waits on: idle at the same job line (a
    peer at the same barrier or condition), or idle in Thread.join (it moves only once a thread it
    joins ends, and the threads that could end are the ones counted elsewhere)."""
    if thread.active:
        return False
    frames = [f for f in thread.frames if not f.native]
    if any(f.function.endswith("Thread.join") and f.file.endswith("threading.py") for f in frames):
        return True
    return waited_at is not None and any(f.file == waited_at.file and f.line == waited_at.line
                                         and f.function == waited_at.function for f in frames)


def _death_text(cause: Any) -> str:
    if not isinstance(cause, dict):
        return "no death cause recorded"
    for ctx in cause.values():
        if isinstance(ctx, dict):
            reason = ctx.get("reason") or ""
            msg = (ctx.get("error_message") or "").strip().splitlines()
            return f"{reason} {msg[0][:200] if msg else ''}".strip()
    return str(cause)[:200]


_PG_RESOURCE = re.compile(r"_group_(?:\d+_)?([0-9a-f]{16,})$")


def _pending_pg_of(task: dict[str, Any], placement_groups: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The PENDING placement group a task is scheduled into: the task's placement_group_id, or,
    where the State API row lacks it, the group id inside its CPU_group_<i>_<id> resource names."""
    ids = {task["placement_group_id"]} if task.get("placement_group_id") else {
        m.group(1) for k in (task.get("required_resources") or {}) if (m := _PG_RESOURCE.search(k))}
    return next((pg for pg in placement_groups if pg.get("placement_group_id") in ids and pg.get("state") == "PENDING"), None)


def _node_for_task(b: Builder, task: dict[str, Any]) -> str | None:
    """The graph node a waiting thread depends on, for one unfinished task it submitted."""
    g, node_totals = b.g, b.inp.node_totals
    if task.get("actor_id"):
        # A call to an actor, or its creation: the actor (its process, or the pending actor).
        return b.actor_node.get(task["actor_id"])
    loop = g.crash_loops.get(str(task.get("task_id")))
    if loop is not None:
        # A task retried after each death: the loop is what the caller waits on, wherever the
        # current attempt is (pending, or running on a fresh worker).
        key = f"task:{loop.id}"
        if key not in g.nodes:
            g.nodes[key] = GNode(key=key, kind="task", name=loop.name, state="restarting", task_id=loop.id,
                                 task_name=loop.name, class_name=str(task.get("func_or_class_name") or loop.name),
                                 node_id=task.get("node_id"),
                                 pid=int(task["worker_pid"]) if task.get("worker_pid") else None)
            _mark_crash_loop(g.nodes[key], loop)
        return key
    if task.get("state") == "RUNNING" and task.get("worker_pid"):
        return b.by_pid.get(ProcessRef(task.get("node_id"), int(task["worker_pid"])))
    if task.get("state") in PENDING_SCHED:
        pg = _pending_pg_of(task, b.inp.placement_groups)
        if pg is not None:
            # Scheduled into a placement group that is not placed: the group is what it waits for
            # (its resources show as Ray's internal CPU_group_<i>_<id> names).
            key = _pg_node(g, pg, node_totals)
            g.nodes[key].evidence.append(f"task {task.get('name')} is scheduled into it")
            if g.nodes[key].class_name is None:
                g.nodes[key].class_name = str(task.get("func_or_class_name") or task.get("name"))
            return key
        return _resource_node(g, task.get("required_resources") or {}, node_totals,
                              f"task {task.get('name')}", b.inp.available, requester=str(task.get("func_or_class_name") or task.get("name")))
    return None


def _amount(resource: str, value: float) -> str:
    """A resource amount as people write it: memory in GiB, the rest as numbers."""
    if resource in ("memory", "object_store_memory") and value >= 2**20:
        return f"{value / 2**30:g} GiB"
    return f"{value:g}"


def _resource_node(g: WaitGraph, demand: dict[str, float], node_totals: list[dict[str, float]], who: str,
                   available: dict[str, float] | None = None, requester: str | None = None) -> str:
    """The node for a pending resource demand: infeasible (no node has it), starved (all of it is
    held), or pending (free capacity exists: the scheduler has simply not placed it yet)."""
    demand = {k: float(v) for k, v in demand.items() if float(v) > 0}
    text = ", ".join(f"{k}: {_amount(k, v)}" for k, v in sorted(demand.items())) or "no resources"
    key = f"resource:{text}"
    feasible = any(all(totals.get(k, 0.0) >= v for k, v in demand.items()) for totals in node_totals)
    exhausted = available is None or any(available.get(k, 0.0) < v for k, v in demand.items())
    state: NodeState = "infeasible" if not feasible else ("starved" if exhausted else "pending")
    if key not in g.nodes:
        g.nodes[key] = GNode(key=key, kind="resource", name=f"{{{text}}}", state=state, demand=demand,
                             pattern={"infeasible": "infeasible-resource", "starved": "resource-starvation"}.get(state))
        largest = max(node_totals, key=lambda t: t.get("CPU", 0.0), default={})
        shown = {k: v for k, v in largest.items() if k in ("CPU", "GPU") or k in demand}
        g.nodes[key].evidence.append(
            f"{'feasible' if feasible else 'no node can satisfy'} {{{text}}}; largest node has {shown}")
    g.nodes[key].evidence.append(f"requested by {who}")
    if g.nodes[key].class_name is None and requester:
        g.nodes[key].class_name = requester
    return key


def _edges_from_parents(b: Builder, key: str, parents: set[str], skip: set[str] | None = None,
                        text: str = "waits for {name} ({state})") -> int:
    """Edges from `key` to whatever runs the unfinished tasks submitted by `parents`; how many."""
    found = 0
    for task in b.index.children(parents):
        if task.get("state") in DONE_STATES or task.get("name") in POLLING_TASKS:
            continue
        if skip and task.get("task_id") in skip:
            continue
        dst = _node_for_task(b, task)
        if dst is None or (skip is not None and dst == key):
            continue
        found += 1
        b.g.add_edge(key, dst, "ray-get-wait", text.format(name=task.get("name"), state=task.get("state")))
    return found


def _pg_node(g: WaitGraph, pg: dict[str, Any], node_totals: list[dict[str, float]]) -> str:
    """The graph node of a PENDING placement group: infeasible (a bundle no node can hold) or not."""
    pg_key = f"pg:{pg.get('placement_group_id')}"
    bundles = [b.get("unit_resources") or {} for b in pg.get("bundles") or []]
    stats = pg.get("stats") or {}
    infeasible = stats.get("scheduling_state") == "INFEASIBLE" or any(
        not any(all(t.get(k, 0.0) >= float(v) for k, v in b.items()) for t in node_totals) for b in bundles)
    if pg_key not in g.nodes:
        g.nodes[pg_key] = GNode(
            key=pg_key, kind="placement_group", name=f"placement group {pg.get('name') or pg.get('placement_group_id', '')[:12]}",
            state="infeasible" if infeasible else "pending",
            pattern="placement-group-infeasible" if infeasible else "resource-starvation", demand=bundle_total(pg),
            evidence=[f"PENDING, scheduling_state {stats.get('scheduling_state')}"
                      + (f", strategy {pg['strategy']}" if pg.get("strategy") else "") + f", bundles {bundles}"],
        )
    return pg_key


_HELPER_CHILD = re.compile(r"multiprocessing\.(resource_tracker|forkserver)|from multiprocessing\.(resource_tracker|forkserver) import")


def _edges_children(b: Builder, key: str, proc: Process) -> None:
    """Edges to the child processes of `proc` (read on its node), each marked as the chain's end."""
    g = b.g
    for (node_id, pid), info in b.inp.info.items():
        if info.get("child_of") != proc.pid or node_id != proc.node_id:
            continue
        if _HELPER_CHILD.search(str(info.get("title") or "")):
            continue  # multiprocessing's own helpers (resource tracker, fork server) wait by design
        child_key = b.by_pid.get(ProcessRef(proc.node_id, pid))
        if child_key is None:
            child_key = f"proc:{proc.node_id}:{pid}"
            g.nodes[child_key] = GNode(key=child_key, kind="process", name=str(info.get("title") or f"pid {pid}"),
                                       state="unknown", pid=pid, node_id=proc.node_id,
                                       evidence=["child process (no Python stack: not a Python process "
                                                 "or not dumpable)"])
        child = g.nodes[child_key]
        child.kind = "process"
        child.class_name = child.class_name or g.nodes[key].class_name  # spawned by this actor
        child.name = f"child of {g.nodes[key].name}: {str(info.get('title') or pid)[:60]}"
        where = child.user_frame or child.frame
        if not any(e.startswith("stack: ") for e in child.evidence):
            child.evidence.append(f"its own stack: {child.pattern or child.state}"
                                  + (f" at {_frame_text(where)}" if where else ""))
        verdict = b.verdicts.get(child_key)
        if verdict is not None and child.pattern == "lock-wait":
            holders = other_threads_in_job_code(verdict, _deciding_thread(verdict))
            if not holders:
                child.evidence.append(
                    "no other thread of the child runs job code, so no thread of the child holds that lock: "
                    "it was held in the parent when the child was forked (fork copies a lock's state, "
                    "not the thread that would release it)")
        child.pattern = "child-process-hang"  # the chain ends in a child that does not exit
        g.add_edge(key, child_key, "child-process-wait", f"waits for child pid {pid}")
        _edge_pipe_back(b, key, child_key, info)


_POOL_FILE = re.compile(r"(^|/)multiprocessing/pool\.py$")
_MP_QUEUE_FILE = re.compile(r"(^|/)multiprocessing/queues\.py$")


def _pool_worker_waiting_for_task(verdict: ProcessVerdict) -> bool:
    """A multiprocessing.Pool worker idle at its own fetch: pool.py's worker() inside the task
    queue's get (reading the pipe, or waiting for the queue's read lock a sibling holds while it
    reads), with no task code of its own on the stack."""
    for thread, _m in verdict.threads:
        frames = [f for f in thread.frames if not f.native]
        at = next((i for i, f in enumerate(frames) if _POOL_FILE.search(f.file) and f.function.split(".")[-1] == "worker"), None)
        if at is None or thread.active:
            continue
        inner = frames[:at]
        if any(_MP_QUEUE_FILE.search(f.file) and f.function.endswith("SimpleQueue.get") for f in inner) \
                and all(is_library(f) for f in inner):
            return True
    return False


def _pool_task_lost(b: Builder, key: str) -> bool:
    """A process waiting in multiprocessing.Pool for results while its pool holds no task.

    Every task was handed out (the pool's task-handler thread idle at its own queue) and every
    pool worker waits for a new one: the results waited for belong to a task no worker holds. A
    worker killed mid-task (SIGKILL, the OOM killer, os._exit) loses its task; Pool starts a
    replacement and never fails the result, so map/apply/get wait forever. The waiting process
    is where the fix goes (ProcessPoolExecutor raises BrokenProcessPool; a timeout on get).
    """
    verdict = b.verdicts[key]
    frame = verdict.main.frame if verdict.main else None
    if frame is None or not _POOL_FILE.search(frame.file):
        return False
    handing_out = [t for t, _m in verdict.threads if any(f.function.endswith("Pool._handle_tasks") for f in t.frames)]
    if any(next((f.function for f in t.frames if not f.native), "") != "Pool._handle_tasks" for t in handing_out):
        return False  # still sending tasks to the workers (pickling, a full pipe)
    proc = verdict.process
    children = [(pid, info) for (node_id, pid), info in b.inp.info.items()
                if info.get("child_of") == proc.pid and node_id == proc.node_id
                and not _HELPER_CHILD.search(str(info.get("title") or ""))]
    workers = [(pid, info) for pid, info in children
               if (k := b.by_pid.get(ProcessRef(proc.node_id, pid))) is not None and _pool_worker_waiting_for_task(b.verdicts[k])]
    if not workers or len(workers) != len(children):
        return False
    node = b.g.nodes[key]
    node.pattern, node.state = "pool-task-lost", "blocked"
    pids = ", ".join(str(pid) for pid, _ in workers)
    node.evidence.append(
        f"waits at {_frame_text(verdict.main.user_frame or frame) if verdict.main else frame.function} for pool results, "
        f"yet its pool holds no task: every task was handed out and each pool worker (pid {pids}) waits for a new one — "
        "the task whose result is awaited died with its worker (killed, OOM, os._exit); Pool never fails that result")
    titles = sorted({str(info.get("title") or "") for _, info in workers} - {""})
    if len(titles) > 1:
        node.evidence.append(f"its pool workers were forked during different calls ({'; '.join(titles)}): the pool "
                             "replaced a worker that exited")
    return True


def _edge_pipe_back(b: Builder, parent_key: str, child_key: str, info: dict[str, Any]) -> None:
    """A child asleep in the kernel writing its stdout/stderr pipe (catalog `pipe-write-wait`:
    its wchan) and silent over the sampling window (no byte written), whose read end its parent
    holds while it waits for the child to exit: the pipe is full and only the parent could empty
    it. The wait closes into a cycle (pipe-full-deadlock)."""
    pattern = catalog().get("pipe-write-wait")
    waits = pattern.kernel_waits if pattern is not None else ()
    asleep = sorted({str(name) for name in (info.get("wchan") or {}).values() if any(r.search(str(name)) for r in waits)})
    read_by_parent = [fd for fd, pipe in sorted((info.get("std_pipes") or {}).items())
                      if fd in ("1", "2") and "read" in (pipe.get("parent_ends") or [])]
    # Asleep at the end, and not one byte written over the whole sampling window: nobody drained
    # the pipe (a parent reading it, in communicate() or a loop, lets the child write on).
    wrote = ((info.get("progress") or {}).get("io") or {}).get("wchar")
    if not asleep or not read_by_parent or wrote != 0:
        return
    child, parent = b.g.nodes[child_key], b.g.nodes[parent_key]
    streams = " and ".join({"1": "stdout", "2": "stderr"}[fd] + f" (fd {fd}, pipe:[{info['std_pipes'][fd]['inode']}])"
                           for fd in read_by_parent)
    child.pattern, child.state = "pipe-write-wait", "blocked"  # the kernel says so, whatever py-spy shows
    child.evidence.append(f"asleep in the kernel writing to a full pipe ({', '.join(asleep)}), no byte written in "
                          f"the sampling window: its {streams}, whose read end its parent {parent.label()} holds")
    b.g.add_edge(child_key, parent_key, "pipe-write-wait",
                 f"blocked writing its {streams}: the pipe is full and only the parent holds its read end, "
                 "but the parent waits for this child to exit instead of reading")


def _edges_queue(b: Builder, key: str) -> None:
    """A consumer of a ray.util.queue waits on the actors that should fill it. The State API does
    not say who holds the queue: the producers are read from evidence, strongest first: actors
    that died or whose task failed (then went idle); failing those, idle actors that have never
    run a single method (the producing call was never made)."""
    g, tasks = b.g, b.tasks
    me = g.nodes[key]
    # A put blocked on the queue actor: the queue is full and the wait is on its consumers.
    full = me.class_name == QUEUE_ACTOR_CLASS and any(
        t.get("actor_id") == me.actor_id and t.get("state") == "RUNNING" and str(t.get("name")).endswith(".put")
        for t in tasks)
    role, text = (("consumer-gone", "waits to put into a full queue this actor should drain") if full
                  else ("producer-gone", "waits on a queue this actor should fill"))
    failed = {t.get("actor_id") for t in tasks if t.get("state") == "FAILED" and t.get("actor_id")}
    called = {t.get("actor_id") for t in tasks if t.get("type") == "ACTOR_TASK" and t.get("actor_id")}
    candidates: list[tuple[str, dict[str, Any]]] = []
    for actor_id, actor in b.actors.items():
        if actor_id == me.actor_id or actor.get("class_name") == QUEUE_ACTOR_CLASS:
            continue
        node_key = b.actor_node.get(actor_id)
        if node_key is not None:
            candidates.append((node_key, actor))
    found = False
    for node_key, actor in candidates:
        node = g.nodes[node_key]
        if node.state == "dead" or (actor.get("actor_id") in failed and node.state == "idle"):
            node.pattern = role
            g.add_edge(key, node_key, "queue-get-wait", text)
            found = True
    if found:
        return
    for node_key, actor in candidates:
        node = g.nodes[node_key]
        if node.state != "idle" or actor.get("actor_id") in called:
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


def _check_in_process_producer(node: GNode, verdict: ProcessVerdict) -> None:
    """A wait on a queue.Queue: its producers can only be threads of this very process. When no
    other thread runs any job code, the producer thread is gone (it returned or died; Python
    printed its traceback, if any, to this worker's stderr): the consumer can never be fed."""
    consumer = _deciding_thread(verdict)
    waited_at = verdict.main.user_frame if verdict.main else None
    in_job = other_threads_in_job_code(verdict, consumer)
    # Peers idle at the same get and threads idle in Thread.join cannot put: the same test as
    # for an event's setter.
    busy = [t for t in in_job if not _cannot_signal(t, waited_at)]
    others = ", ".join(sorted(str(t.name or t.os_thread_id) for t, _ in verdict.threads if t is not consumer))
    if busy:
        names = ", ".join(str(t.name or t.os_thread_id) for t in busy)
        node.evidence.append(f"queue.Queue of this process; threads running job code that may fill it: {names}")
        return
    node.pattern = "producer-gone"
    node.state = "blocked"
    joiners = [t for t in in_job if _joins(t)]
    if joiners:
        where = ", ".join(f"{t.name or t.os_thread_id} at {_frame_text(_job_frame(t))}" for t in joiners)
        node.evidence.append(
            f"waits on a queue.Queue that only threads of this process can fill; the other thread(s) running job "
            f"code wait in Thread.join for threads of this process to end ({where}): a put placed after that join "
            "(a stop sentinel sent after executor.shutdown(wait=True) / the end of a `with` pool block) can never "
            "run — the process waits on itself. Put before joining")
        return
    node.evidence.append(
        "waits on a queue.Queue that only threads of this process can fill, and no other thread runs "
        f"job code (threads: {others or 'none'}): the producer thread is gone — it returned or died "
        "(a thread's traceback goes to this worker's .err log)")


def _joins(thread: Thread) -> bool:
    """The thread is idle in Thread.join (directly or through an executor's shutdown)."""
    return not thread.active and any(f.function.endswith("Thread.join") and f.file.endswith("threading.py")
                                     for f in thread.frames if not f.native)


def _job_frame(thread: Thread) -> Frame | None:
    """The thread's innermost frame of job code (not library), if any."""
    return next((f for f in thread.frames if not f.native and not is_library(f)), None)


def _in_collective(node: GNode) -> bool:
    """True when the node waits for its peers (a collective, DDP's backward, a rendezvous)."""
    pattern = catalog().get(node.pattern or "")
    return pattern is not None and pattern.edge == "collective-peers"


def _collective_group(b: Builder) -> dict[str, list[str]]:
    """Ranks grouped by actor class: the processes that share a process group."""
    groups: dict[str, list[str]] = {}
    for node in b.g.nodes.values():
        if _in_collective(node) and node.class_name:
            groups.setdefault(node.class_name, [])
    for cls in groups:
        for actor_id, actor in b.actors.items():
            if actor.get("class_name") == cls and actor_id in b.actor_node:
                groups[cls].append(b.actor_node[actor_id])
    return groups


def edges_collectives(b: Builder) -> None:
    """Ranks in a collective wait on the peers that are not in it: dead ones first (a dead rank
    explains everything, and peers it took down are collateral), then idle or busy ones."""
    g = b.g
    for _cls, members in _collective_group(b).items():
        waiting = [k for k in members if _in_collective(g.nodes[k])]
        in_it = set(waiting)
        others = [k for k in members if k not in in_it]
        dead = [k for k in others if g.nodes[k].state == "dead"]
        for peer in others:
            node = g.nodes[peer]
            if node.state == "dead":
                node.pattern = "peer-rank-dead"
            elif node.state == "pending":
                # Never started: the waiting ranks wait for it to be scheduled (the pending actor
                # leads on to the resource it waits for).
                node.evidence.append("never started (actor not yet created): its peers wait for it "
                                     "to join the process group")
            elif dead and node.state == "idle":
                node.evidence.append("collateral: not in the collective since a dead peer broke it")
                continue
            elif node.state == "idle" or node.pattern in (None, "idle-worker"):
                node.pattern = "collective-skipped"
                node.evidence.append("not in any collective while its peers are")
            for w in waiting:
                frame = g.nodes[w].frame
                why = "has not started" if node.state == "pending" else "is not"
                g.add_edge(w, peer, g.nodes[w].pattern or "collective-wait",
                           f"in {frame.function if frame is not None else 'a collective'}; "
                           f"{node.name}{'' if node.rank is None else f' rank {node.rank}'} {why}")
        if not others and len(waiting) > 1:
            _mark_mismatch(g, waiting)


def _mark_mismatch(g: WaitGraph, waiting: list[str]) -> None:
    """All ranks are in collectives: the minority deciding line is the odd one out.

    Ranks are grouped by the collective they are in (function and line of the torch frame) and
    the job line that called it. A strict majority names the odd ranks; a tie names every group.
    """
    def where(k: str) -> tuple[str, int | None, str]:
        node = g.nodes[k]
        frame, user = node.frame, node.user_frame
        return ((frame.function, frame.line) if frame else ("?", None)) + (_frame_text(user) if user else "",)

    def text(k: str) -> str:
        fn, _line, caller = where(k)
        return f"{fn}" + (f" called from {caller}" if caller else "")

    def ranks(keys: list[str]) -> str:
        known = sorted(r for r in (g.nodes[k].rank for k in keys) if r is not None)
        if len(known) != len(keys):
            return f"{len(keys)} peers are"
        return f"rank {known[0]} is" if len(known) == 1 else "ranks " + ", ".join(str(r) for r in known) + " are"

    groups: dict[tuple[str, int | None, str], list[str]] = {}
    for k in waiting:
        groups.setdefault(where(k), []).append(k)
    if len(groups) < 2:
        return
    sizes = sorted((len(v) for v in groups.values()), reverse=True)
    majority = max(groups.values(), key=len) if sizes[0] > sizes[1] else None
    if majority is None:
        # A tie: DDP runs its collectives on every rank every step, so ranks inside DDP are on
        # the common path and the rank in an explicit collective is the odd one.
        in_ddp = [keys for keys in groups.values() if all(g.nodes[k].pattern == "ddp-wait" for k in keys)]
        if len(in_ddp) == 1:
            majority = in_ddp[0]
    for keys in groups.values():
        if keys is majority:
            continue
        mine = set(keys)
        others = ranks([k for k in waiting if k not in mine])  # once per group, not per rank
        for odd in keys:
            g.nodes[odd].pattern = "collective-mismatch"
            g.nodes[odd].evidence.append(
                f"in {text(odd)} while {others} "
                + (f"in {text(majority[0])}" if majority else "in other collectives")
                + " (gloo/NCCL pair collectives by call order: these never match)")
            for k in majority or []:
                frame = g.nodes[k].frame
                g.add_edge(k, odd, "collective-wait",
                           f"in {frame.function if frame is not None else 'a collective'}; "
                           f"{g.nodes[odd].name}{'' if g.nodes[odd].rank is None else f' rank {g.nodes[odd].rank}'} "
                           f"is in {where(odd)[0]} instead")


def edges_pending_actors(b: Builder) -> None:
    """A pending actor waits for the resources it asks for."""
    g = b.g
    for actor_id, actor in b.actors.items():
        key = b.actor_node.get(actor_id)
        if key is None or g.nodes[key].state != "pending":
            continue
        demand = dict(actor.get("required_resources") or {})
        creation = next((t for t in b.index.of_actor(actor_id) if t.get("type") == "ACTOR_CREATION_TASK"), None)
        if creation and creation.get("required_resources"):
            demand = dict(creation["required_resources"])
        if _edge_to_pending_group(b, key, actor, creation):
            continue
        res = _resource_node(g, demand, b.inp.node_totals, f"actor {actor.get('class_name')}", b.inp.available,
                             requester=actor.get("class_name"))
        g.add_edge(key, res, "infeasible-resource", "waits to be scheduled")


def edges_starved_resources(b: Builder) -> None:
    """A starved resource demand waits for the blocked or busy processes that hold it."""
    g = b.g
    for key, node in list(g.nodes.items()):
        if node.kind != "resource" or node.state != "starved":
            continue
        wanted = set(re.findall(r"([A-Za-z_][\w:]*): ", node.name))
        for holder_key, holder in g.nodes.items():
            if holder.kind == "resource" or holder.state not in ("blocked", "busy"):
                continue
            holder_actor = b.actors.get(holder.actor_id or "") or {}
            held = dict(holder_actor.get("required_resources") or {})
            for task in b.running.get(holder_key, []):
                if task.get("type") == "NORMAL_TASK":
                    held.update(task.get("required_resources") or {})
            if any(float(held.get(r, 0)) > 0 for r in wanted):
                g.add_edge(key, holder_key, "resource-starvation",
                           f"{holder.name} holds {{{', '.join(f'{r}: {held[r]:g}' for r in wanted if r in held)}}}")


def note_queued_calls(b: Builder) -> None:
    """Calls queued behind a busy actor (actor-call-queued), as evidence on that actor."""
    for task in b.tasks:
        if task.get("state") not in QUEUED_STATES or task.get("worker_pid"):
            continue
        key = b.actor_node.get(task.get("actor_id") or "")
        if key is None:
            continue
        busy_with = ", ".join(t.get("name", "?") for t in b.running.get(key, [])) or "another call"
        b.g.nodes[key].evidence.append(f"call {task.get('name')} queued (actor-call-queued) behind {busy_with}")


def edges_supervisors(b: Builder) -> None:
    """A controller waits on the stuck actors it created.

    An actor that runs a long task and shows no wait of its own (an async loop between polls, as
    Ray Train's TrainController) while actors it created are blocked, dead or culprits, is only as
    stuck as they are: the chain goes on through it to them. Creation is read from the State API:
    an actor's creation task has the creating task as its parent.
    """
    g, tasks, actor_node, running = b.g, b.tasks, b.actor_node, b.running
    created_by: dict[str, str] = {}  # child actor id -> id of the task that created it
    own_tasks: dict[str, set[str]] = {}  # actor id -> ids of its tasks (creation task included)
    for task in tasks:
        actor_id, task_id = task.get("actor_id"), task.get("task_id")
        if actor_id and task_id:
            own_tasks.setdefault(actor_id, set()).add(task_id)
            if task.get("type") == "ACTOR_CREATION_TASK" and task.get("parent_task_id"):
                created_by[actor_id] = task["parent_task_id"]
    for sup_id, sup_key in actor_node.items():
        sup = g.nodes[sup_key]
        if sup.pattern is not None or sup.state not in ("unknown", "idle") or g.out(sup_key) or not running.get(sup_key):
            continue
        doing = ", ".join(sorted({str(t.get("name")) for t in running[sup_key]}))
        for child_id, parent in created_by.items():
            child_key = actor_node.get(child_id)
            if child_key is None or child_id == sup_id or parent not in own_tasks.get(sup_id, set()):
                continue
            child = g.nodes[child_key]
            own = catalog().get(child.pattern or "")
            if child.state in ("blocked", "busy", "dead", "pending") or (own is not None and own.kind == "root-cause"):
                g.add_edge(sup_key, child_key, "supervises",
                           f"runs {doing} and created {child.label()}, which is {child.state}"
                           + (f" ({child.pattern})" if child.pattern else ""))
        if g.out(sup_key):
            sup.state = "blocked"
            sup.evidence.append(f"runs {doing} and waits on the actors it created (its own stack shows no wait)")


def edges_train_barrier(b: Builder) -> None:
    """Ray Train's barrier: its SynchronizationActor waits for the ranks that have not called it.

    Each rank that reaches ray.train.report (or another barrier) has one RUNNING
    `broadcast_from_rank_zero` call on the actor; the rank that made it is the actor of the call's
    parent task. Every RayTrainWorker of the job without such a call is missing.
    """
    g, tasks, actors, actor_node = b.g, b.tasks, b.actors, b.actor_node
    by_id = {t.get("task_id"): t for t in tasks}
    calls = [t for t in tasks if t.get("name") == BARRIER_TASK and t.get("state") == "RUNNING" and t.get("actor_id")]
    workers = [aid for aid, a in actors.items() if a.get("class_name") == WORKER_CLASS and aid in actor_node]
    for sync_id in sorted({str(t["actor_id"]) for t in calls}):
        sync_key = actor_node.get(sync_id)
        if sync_key is None:
            continue
        joined = {(by_id.get(t.get("parent_task_id")) or {}).get("actor_id") for t in calls if t["actor_id"] == sync_id}
        missing = [aid for aid in workers if aid not in joined]
        if not missing:
            continue

        def names(ids: list[str]) -> str:
            return ", ".join(g.nodes[actor_node[a]].label() for a in ids if a in actor_node) or "none"

        node = g.nodes[sync_key]
        node.pattern, node.state = "train-barrier-wait", "blocked"
        node.evidence.append(f"{BARRIER_TASK} RUNNING for {names([a for a in workers if a in joined])}; "
                             f"not called by {names(missing)}")
        for aid in missing:
            g.add_edge(sync_key, actor_node[aid], "train-barrier",
                       f"{g.nodes[actor_node[aid]].label()} never reached the barrier (ray.train.report): no {BARRIER_TASK} call from it")


def _edge_to_pending_group(b: Builder, key: str, actor: dict[str, Any], creation: dict[str, Any] | None) -> bool:
    """A pending actor to be placed in a PENDING placement group waits for the group (its
    resources are the group's CPU_group_<i>_<id> names, which no node has until it is placed)."""
    pgs = b.inp.placement_groups
    pg = _pending_pg_of(actor, pgs) or (_pending_pg_of(creation, pgs) if creation else None)
    if pg is None:
        return False
    pg_key = _pg_node(b.g, pg, b.inp.node_totals)
    note = f"actor {actor.get('class_name')} is to be placed in it"
    if note not in b.g.nodes[pg_key].evidence:
        b.g.nodes[pg_key].evidence.append(note)
    if b.g.nodes[pg_key].class_name is None:
        b.g.nodes[pg_key].class_name = actor.get("class_name")
    b.g.add_edge(key, pg_key, "pg-ready-wait", "waits to be placed in its placement group, which is PENDING")
    return True


# ---------------------------------------------------------------- who holds what a demand needs


def edges_resource_holders(b: Builder) -> None:
    """A feasible request unmet for lack of resources (a starved task or actor, a PENDING group)
    waits for whoever holds what it needs and uses none of it: placement groups with no live user
    and idle actors, of this job or any other (blocked holders are edges_starved_resources')."""
    inp, g = b.inp, b.g
    demands = [k for k in g.nodes if _unmet_for_lack_of_resources(b, k)]
    if not demands:
        return
    jobs = {str(j.get("job_id")): j for j in inp.jobs}
    holders = [h for h in leaked_placement_groups(inp.placement_groups, inp.actors, inp.tasks, jobs, inp.now_s, inp.usage)
               if h.used or h.age_s is None or h.age_s >= _threshold("placement-group-leaked", "min_age_never_used_s")]
    holders += [h for h in idle_actors(inp.actors, inp.tasks, jobs, inp.now_s)
                if h.age_s is None or h.age_s >= _threshold("idle-actor-holds-resources", "min_idle_s")]
    reserved = status_reserved_line(inp.status_text)
    for key in demands:
        need = g.nodes[key].demand
        wanted = {r for r in need if r not in ("memory", "object_store_memory")}
        for holder in holders:
            if not holder.holds_any(wanted) or key == f"pg:{holder.id}":
                continue
            holder_key = _holder_node(b, holder, reserved)
            if holder_key is not None:
                g.add_edge(key, holder_key, "held-by",
                           f"needs {{{', '.join(f'{r}: {need[r]:g}' for r in sorted(wanted))}}}; {holder.name} holds "
                           f"{holder.held_text(wanted)} and nothing uses it")


def _unmet_for_lack_of_resources(b: Builder, key: str) -> bool:
    """A feasible request that waits because what it needs is taken: a starved task or actor
    request, or a PENDING group whose scheduler said NO_RESOURCES (or whose bundles exceed what is
    free). A request with free capacity is merely not placed yet: nobody holds it up."""
    node = b.g.nodes[key]
    if not node.demand or node.kind not in ("resource", "placement_group"):
        return False
    if node.kind == "resource":
        return node.state == "starved"
    pg = next((p for p in b.inp.placement_groups if f"pg:{p.get('placement_group_id')}" == key), {})
    if node.state != "pending" or pg.get("state") != "PENDING":
        return False
    if (pg.get("stats") or {}).get("scheduling_state") == "NO_RESOURCES":
        return True
    free = b.inp.available
    return free is not None and any(free.get(r, 0.0) < v for r, v in node.demand.items())


def _threshold(pattern: str, name: str) -> float:
    """A number the catalog gives a pattern's rule (references/patterns.yaml `thresholds`), 0 if none."""
    found = catalog().get(pattern)
    return float(found.thresholds.get(name, 0.0)) if found is not None else 0.0


def _holder_node(b: Builder, holder: Holder, reserved: str | None) -> str | None:
    """The graph node of a resource holder, made when it is not in the graph yet; None for an
    actor of this job whose own stack shows it doing something (the stack outranks the listing)."""
    g = b.g
    key = b.actor_node.get(holder.id) if holder.kind == "actor" else None
    if key is not None and g.nodes[key].state != "idle":
        return None
    if key is None:
        key = f"pg:{holder.id}" if holder.kind == "placement_group" else f"actor:{holder.id}"
        if key not in g.nodes:
            g.nodes[key] = GNode(key=key, kind="placement_group" if holder.kind == "placement_group" else "actor",
                                 name=holder.name, state="idle", pid=holder.pid, node_id=holder.node_id,
                                 actor_id=holder.id if holder.kind == "actor" else None, class_name=holder.class_name)
    node = g.nodes[key]
    node.pattern = holder.pattern
    notes = [*holder.evidence, _release_advice(holder)]
    if holder.kind == "placement_group" and reserved:
        notes.append(f"`ray status` shows `{reserved}`: the reservation reads as unused resources (0.0 used) and the "
                     "waiting group as a pending demand; the group holding them is not named — the usual disguise "
                     "of a leaked group")
    node.evidence += [text for text in notes if text not in node.evidence]
    return key


def _release_advice(holder: Holder) -> str:
    """How to release a holder (advice only: the diagnosis never changes the cluster)."""
    if holder.kind == "placement_group":
        named = holder.class_name and not holder.name.endswith(holder.id[:12])
        how = (f"ray.util.remove_placement_group(ray.util.get_placement_group({holder.class_name!r})) from its namespace"
               if named else f"ray.util.remove_placement_group on group {holder.id} (`ray list placement-groups`)")
    else:
        how = "ray.kill(<its handle>) (a named actor: ray.get_actor(name, namespace=...))"
    return f"to release it: {how} — advice only, this tool changes nothing"


# ---------------------------------------------------------------- OS file locks (/proc/locks)


def detect_file_lock_waits(b: Builder) -> None:
    """Processes that /proc/locks lists as waiting (`->`) for a file lock: the kernel says what
    they wait for, whatever their stack shows (py-spy has no frame for the C call). A process whose
    stack leads nowhere else reads as file-lock-wait (followed by its catalog edge, lock-holder);
    one with another wait it is followed by (ray.get in another thread) gets the lock edge too."""
    for key, verdict in b.verdicts.items():
        waits = [lock for lock in _info(b, key).get("file_locks") or [] if lock.get("waiting")]
        if not waits:
            continue
        node = b.g.nodes[key]
        tid, frame = _file_lock_thread(verdict, _info(b, key))
        if _leads_nowhere(node) or (verdict.main is not None and frame in (verdict.main.user_frame, verdict.main.frame)):
            node.pattern, node.state = "file-lock-wait", "blocked"
            node.frame = node.user_frame = frame
        else:
            _edges_file_locks_of(b, key, frame)
        for lock in waits:
            holders = ", ".join(f"pid {h.get('pid')}" for h in lock.get("holders") or []) or (
                "no holder on this node (a lock on a network filesystem held from another machine, or an OFD lock)")
            node.evidence.append(
                f"thread {tid or '?'} waits for the {lock.get('type')} {lock.get('access')} lock on {_lock_path(lock)} "
                f"(inode {lock.get('dev')}:{lock.get('inode')}) at {_frame_text(frame)}; held by {holders} (/proc/locks)")


def _info(b: Builder, key: str) -> dict[str, Any]:
    proc = b.verdicts[key].process
    return b.inp.info.get(proc.ref) or {}


def _leads_nowhere(node: GNode) -> bool:
    """True when a process's own reading is followed nowhere (no pattern, or one with edge none)."""
    pattern = catalog().get(node.pattern or "")
    return pattern is None or pattern.edge == "none"


def _lock_path(lock: dict[str, Any]) -> str:
    return str(lock.get("path") or f"inode {lock.get('dev')}:{lock.get('inode')}")


def _file_lock_thread(verdict: ProcessVerdict, info: dict[str, Any]) -> tuple[str | None, Frame | None]:
    """(tid, frame) of the thread asleep in a kernel file-lock wait (its wchan, matched against the
    catalog's kernel_waits); failing that (wchan hidden), the process's deciding thread."""
    pattern = catalog().get("file-lock-wait")
    waits = pattern.kernel_waits if pattern is not None else ()
    tids = {str(tid): str(name) for tid, name in (info.get("wchan") or {}).items()
            if any(r.search(str(name)) for r in waits)}
    for thread, match in verdict.threads:
        if str(thread.os_thread_id) in tids:
            return f"{thread.os_thread_id} (kernel wait {tids[str(thread.os_thread_id)]})", match.user_frame or match.frame
    main = verdict.main
    return None, (main.user_frame or main.frame) if main is not None else None


def _edges_file_locks_of(b: Builder, key: str, frame: Frame | None = None) -> None:
    """Edges from a process waiting for file locks to the processes holding them (by PID in
    /proc/locks, on the same node): one of the job's, or one made here from its title."""
    node = b.g.nodes[key]
    frame = frame or node.user_frame or node.frame
    for lock in _info(b, key).get("file_locks") or []:
        if not lock.get("waiting"):
            continue
        for holder in lock.get("holders") or []:
            dst = b.by_pid.get(ProcessRef(node.node_id, holder.get("pid"))) or _lock_holder_node(b.g, node.node_id, holder)
            b.g.add_edge(key, dst, "file-lock-wait",
                         f"waits at {_frame_text(frame)} for the {lock.get('type')} "
                         f"{lock.get('access')} lock on {_lock_path(lock)}, held by pid {holder.get('pid')} (/proc/locks)")
            _mark_file_lock_holder(b.g.nodes[dst], _lock_path(lock))


def _lock_holder_node(g: WaitGraph, node_id: str | None, holder: dict[str, Any]) -> str:
    """A node for a lock holder that is not one of the job's dumped processes."""
    key = f"proc:{node_id}:{holder.get('pid')}"
    if key not in g.nodes:
        g.nodes[key] = GNode(key=key, kind="process", name=str(holder.get("title") or f"pid {holder.get('pid')}")[:80],
                             state="unknown", pid=holder.get("pid"), node_id=node_id,
                             evidence=["holds a file lock; not a process of this job that was dumped"])
    return key


def _mark_file_lock_holder(node: GNode, path: str) -> None:
    """The holder of a file lock others wait for: when its own reading says nothing, holding the
    lock is what it is found for (a chain end: file-lock-held)."""
    note = f"holds the lock on {path} (/proc/locks)"
    if note not in node.evidence:
        node.evidence.append(note)
    if node.pattern in (None, "idle-worker"):
        node.pattern = "file-lock-held"



# The build, in order. Later passes read what earlier ones found: lock and edge readings before
# collectives (which pair ranks by pattern), edges before the detectors that ask "does anyone wait
# on this node?" (event waits, supervisors, async awaits).
PASSES: tuple[Pass, ...] = (
    add_process_nodes,
    add_actor_nodes,
    mark_crash_loops,
    index_running_tasks,
    add_last_calls,
    detect_lock_waits,
    detect_file_lock_waits,
    follow_edges,
    edges_collectives,
    edges_pending_actors,
    edges_starved_resources,
    edges_resource_holders,
    edges_train_barrier,
    mark_stream_pacing,
    detect_event_waits,
    edges_supervisors,
    detect_async_await,
    note_queued_calls,
)
