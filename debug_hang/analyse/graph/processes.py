"""Nodes: one per dumped process and per actor without one (dead, pending), crash loops, the
calls each process runs, and the calls queued on it."""

from __future__ import annotations

import re
from typing import Any

from debug_hang.analyse.crashloop import CrashLoop, find_crash_loops
from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.children import children_crash_loop_of
from debug_hang.analyse.graph.model import QUEUED_STATES, GNode, NodeKind, NodeState
from debug_hang.analyse.graph.threads import frame_text, proc_key
from debug_hang.analyse.patterns import ProcessVerdict, settings
from debug_hang.model import Process, ProcessRef
from debug_hang.rows import ActorRow, TaskRow
from debug_hang.snapshot import DONE_STATES, POLLING_TASKS
from debug_hang.untrusted import one_line

_PROCESS_STATE: dict[str, NodeState] = {"blocked": "blocked", "busy": "busy", "idle": "idle"}


_ROLE_KIND: dict[str, NodeKind] = {"driver": "driver", "actor": "actor", "task": "task"}


_RANK_IN_NAME = re.compile(r"rank[-_ ]?(\d+)", re.IGNORECASE)


def _rank_of(proc: Process | None, actor: ActorRow | None) -> int | None:
    """A rank from evidence: the process environment, the actor's runtime_env env_vars, its name."""
    if proc is not None and proc.rank is not None:
        return proc.rank
    if actor is None:
        return None
    env = actor.rank_env
    if str(env.get("RANK", "")).isdigit():
        return int(env["RANK"])
    name = actor.name or actor.repr_name or ""
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


@graph_pass()
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
    name = proc.actor_class or proc.task_name or (one_line(proc.title) if proc.title else f"pid {proc.pid}")
    if proc.role == "driver":
        name = f"driver ({one_line(proc.title)})"
    rank = _rank_of(proc, actor)
    node = GNode(
        key=proc_key(proc), kind="rank" if rank is not None else kind, name=name, pid=proc.pid,
        node_id=proc.node_id, actor_id=proc.actor_id, task_id=proc.task_id, class_name=proc.actor_class,
        actor_name=proc.actor_name or (actor.name if actor else None), task_name=proc.task_name, rank=rank,
        state=_PROCESS_STATE.get(verdict.verdict, "unknown"),
        pattern=verdict.pattern if verdict.pattern != "unknown" else None,
        frame=verdict.main.frame if verdict.main else None,
        user_frame=verdict.main.user_frame if verdict.main else None,
    )
    if verdict.main and verdict.main.frame is not None and verdict.verdict != "idle":
        where = verdict.main.user_frame or verdict.main.frame
        node.evidence.append(f"stack: {verdict.main.pattern} at {frame_text(where)}")
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
    node.evidence.append(f"another thread waits for a lock at {frame_text(node.lock_wait)}, while this "
                         "one is in ray.get: a lock held across a remote call?")


@graph_pass(after=("add_process_nodes",))
def add_actor_nodes(b: Builder) -> None:
    """A node for each dead or pending actor of the job (no process to dump)."""
    for actor_id, actor in b.actors.items():
        state = actor.state
        if actor_id in b.actor_node or state == "ALIVE":
            continue  # dumped, or alive but not dumped (reported as a collection error)
        node = GNode(
            key=f"actor:{actor_id}", kind="actor", name=str(actor.class_name),
            state="dead" if state == "DEAD" else "pending", actor_id=actor_id,
            class_name=actor.class_name, actor_name=actor.name, node_id=actor.node_id,
            pid=actor.pid,
        )
        node.rank = _rank_of(None, actor)
        if state == "DEAD":
            node.evidence.append(f"actor DEAD: {_death_text(actor.death_cause)}")
        else:
            node.evidence.append(f"actor {state}, required resources {actor.required_resources}")
        b.g.nodes[node.key] = node
        b.actor_node[actor_id] = node.key


def stopped_by_signal(info: dict[str, Any]) -> bool:
    """The probe read the process's state as `T` (stopped by a signal) before its first dump and
    after its last: stopped for the whole window (py-spy's own pauses read `t`, never `T`)."""
    states = info.get("run_state")
    return isinstance(states, list) and len(states) == 2 and all(s == "T" for s in states)


@graph_pass(after=("add_actor_nodes",), decides=("process-stopped",))
def add_stopped_processes(b: Builder) -> None:
    """A process stopped by a signal (SIGSTOP): nothing in it runs until a SIGCONT, whatever its
    stack shows (py-spy cannot attach to it). It is a cause of its own; a stopped process py-spy
    could not dump still gets its node (its actor, its RUNNING call, or the driver), so that its
    waiters lead to it."""
    for ref, info in b.inp.info.items():
        if not stopped_by_signal(info):
            continue
        key = b.by_pid.get(ref) or _stopped_node(b, ref, info)
        if key is None:
            continue
        node = b.g.nodes[key]
        node.pattern, node.state = "process-stopped", "blocked"
        node.evidence.append(
            f"stopped by a signal: state T in /proc/{ref.pid}/stat before the first sample and after the last "
            "(SIGSTOP/SIGTSTP, no SIGCONT since); nothing in it runs, its stack is frozen where the signal came, "
            "and only a SIGCONT from outside resumes it")
        errors = [e for e in b.inp.dump_errors if e.pid == ref.pid and e.node_id in (None, ref.node_id) and "SIGSTOP" in str(e.error or "")]
        if errors:
            node.evidence.append(f"py-spy could not attach: {str(errors[0].error)[:200]}")


def _stopped_node(b: Builder, ref: ProcessRef, info: dict[str, Any]) -> str | None:
    """A node for a stopped process with no stack: its actor, the call it runs, or the driver."""
    actor = next((a for a in b.actors.values() if a.pid == ref.pid and a.node_id in (None, ref.node_id)
                  and a.state == "ALIVE"), None)
    task = next((t for t in b.tasks if t.state == "RUNNING" and t.worker_pid == ref.pid and t.node_id in (None, ref.node_id)), None)
    job = b.inp.job
    if actor is not None:
        node = GNode(key=f"actor:{actor.actor_id}", kind="actor", name=str(actor.class_name), state="blocked",
                     pid=ref.pid, node_id=ref.node_id, actor_id=actor.actor_id, class_name=actor.class_name,
                     actor_name=actor.name)
        b.actor_node[actor.actor_id] = node.key
    elif task is not None:
        node = GNode(key=f"task:{task.task_id}", kind="task", name=str(task.name), state="blocked", pid=ref.pid,
                     node_id=ref.node_id, task_id=task.task_id, task_name=task.name)
    elif job.driver_pid == ref.pid and job.driver_node_id in (None, ref.node_id):
        node = GNode(key=f"driver:{job.job_id}", kind="driver", name=f"driver ({str(info.get('title') or '')[:60]})",
                     state="blocked", pid=ref.pid, node_id=ref.node_id)
    else:
        return None
    if node.key in b.g.nodes:
        return None
    b.g.nodes[node.key] = node
    b.by_pid[ref] = node.key
    return node.key


@graph_pass(after=("add_actor_nodes",), decides=("crash-loop",))
def mark_crash_loops(b: Builder) -> None:
    """Actors restarted (tasks retried) after each death: not "starting", a crash loop (crashloop.py).
    A task's loop node is made here and enters the graph when a waiter follows it (node_for_task)."""
    b.g.crash_loops = find_crash_loops(list(b.actors.values()), b.tasks)
    for loop in b.g.crash_loops.values():
        if loop.kind == "actor" and loop.id not in b.actor_node and loop.id in b.actors:
            _add_undumped_actor(b, b.actors[loop.id])
        if loop.kind == "actor" and loop.id in b.actor_node:
            mark_crash_loop(b.g.nodes[b.actor_node[loop.id]], loop)
        elif loop.kind == "task":
            b.task_loops[loop.id] = _task_loop_node(b, loop)
    # A process waiting on its children while they die and are replaced, its log repeating one
    # traceback: a crash loop one level down (children.py), read before its wait is followed.
    for key, verdict in b.verdicts.items():
        if key in b.g.nodes and b.g.nodes[key].pattern == "child-process-wait":
            children_crash_loop_of(b, key, verdict.process)


def _add_undumped_actor(b: Builder, actor: ActorRow) -> None:
    """A node for an actor listed ALIVE whose process no sample caught: one that dies on every
    call is gone (restarting) as often as it is there, and its waiters still wait on it."""
    node = GNode(key=f"actor:{actor.actor_id}", kind="actor", name=str(actor.class_name), state="restarting",
                 actor_id=actor.actor_id, class_name=actor.class_name, actor_name=actor.name,
                 node_id=actor.node_id, pid=actor.pid)
    node.rank = _rank_of(None, actor)
    node.evidence.append(f"actor {actor.state} when listed (pid {actor.pid}), but no stack sample caught its "
                         "process: it exited in between")
    b.g.nodes[node.key] = node
    b.actor_node[actor.actor_id] = node.key


def _task_loop_node(b: Builder, loop: CrashLoop) -> GNode:
    """The node of a task retried after each death, from its current (unfinished) attempt."""
    task = next((t for t in b.tasks if t.task_id == loop.id and not t.done), None)
    node = GNode(key=f"task:{loop.id}", kind="task", name=loop.name, state="restarting", task_id=loop.id,
                 task_name=loop.name, class_name=(task.func_or_class_name if task else None) or loop.name,
                 node_id=task.node_id if task else None, pid=task.worker_pid if task else None)
    mark_crash_loop(node, loop)
    return node


def mark_crash_loop(node: GNode, loop: CrashLoop) -> None:
    """It ran and died, and is restarted (retried): a crash loop once the rules' count is reached."""
    node.pattern, node.state = ("crash-loop" if loop.confirmed else None), "restarting"
    node.evidence.append(loop.text())


@graph_pass(after=("mark_crash_loops", "add_stopped_processes"))
def index_running_tasks(b: Builder) -> None:
    """The RUNNING calls of each dumped process; a call that no thread shows is not idleness."""
    for task in b.tasks:
        if task.state == "RUNNING" and task.worker_pid:
            key = b.by_pid.get(ProcessRef(task.node_id, int(task.worker_pid)))
            if key:
                b.running.setdefault(key, []).append(task)
    for key, running in b.running.items():
        node = b.g.nodes[key]
        calls = [t for t in running if t.name not in POLLING_TASKS]
        if node.state == "idle" and calls:
            # The State API says a call runs here, yet no thread shows it: a generator paused by
            # backpressure (num_returns="streaming") until its consumer reads on, or a call caught
            # between two frames. Not an idle actor.
            node.state, node.pattern = "unknown", None
            b.paused[key] = calls
            node.evidence.append(f"{', '.join(sorted({str(t.name) for t in calls}))} RUNNING here, but no thread "
                                 "runs it: a streaming generator paused until its consumer reads more, or a call "
                                 "between frames (dump again with --samples 5)")


@graph_pass(after=("index_running_tasks",))  # its line follows the running-call note
def add_last_calls(b: Builder) -> None:
    """Record each actor's last finished/failed call as evidence (a rank that finished early)."""
    last: dict[str, TaskRow] = {}
    for task in b.tasks:
        aid = task.actor_id
        if not aid or task.state not in DONE_STATES or task.type != "ACTOR_TASK" or task.name in POLLING_TASKS:
            continue
        if aid not in last or (task.end_time_ms or 0) > (last[aid].end_time_ms or 0):
            last[aid] = task
    for aid, task in last.items():
        key = b.actor_node.get(aid)
        if key is None:
            continue
        text = f"last finished call: {task.name} {task.state}"
        if task.state == "FAILED":
            err = (task.error_message or "").strip().splitlines()
            text += f" ({task.error_type}: {err[-1][:200] if err else ''})"
        b.g.nodes[key].evidence.append(text)


def _death_text(cause: Any) -> str:
    if not isinstance(cause, dict):
        return "no death cause recorded"
    for ctx in cause.values():
        if isinstance(ctx, dict):
            reason = ctx.get("reason") or ""
            msg = (ctx.get("error_message") or "").strip().splitlines()
            return f"{reason} {msg[0][:200] if msg else ''}".strip()
    return str(cause)[:200]


@graph_pass(after=("detect_async_await",), decides=("actor-call-queued",))
def note_queued_calls(b: Builder) -> None:
    """Calls queued behind a busy actor (actor-call-queued), as evidence on that actor."""
    for task in b.tasks:
        if task.state not in QUEUED_STATES or task.worker_pid:
            continue
        key = b.actor_node.get(task.actor_id or "")
        if key is None:
            continue
        busy_with = ", ".join(t.name or "?" for t in b.running.get(key, [])) or "another call"
        b.g.nodes[key].evidence.append(f"call {task.name} queued (actor-call-queued) behind {busy_with}")


@graph_pass(after=("note_queued_calls",))
def note_constructors(b: Builder) -> None:
    """Actors whose constructor runs in the dumped process (their creation task RUNNING there)
    while calls to them wait: an actor runs no method before its __init__ returns, so those calls
    are queued behind the constructor, whatever the constructor waits for (rootcause.py: in a
    cycle, that wait is where the fix goes)."""
    for task in b.tasks:
        if task.type != "ACTOR_CREATION_TASK" or task.state != "RUNNING" or not task.actor_id:
            continue
        key = b.actor_node.get(task.actor_id)
        node = b.g.nodes.get(key) if key else None
        if node is None or (node.pid and task.worker_pid and node.pid != task.worker_pid):
            continue
        queued = [t for t in b.index.of_actor(task.actor_id)
                  if t.type == "ACTOR_TASK" and t.state not in DONE_STATES and t.state != "RUNNING"]
        if not queued:
            continue
        calls = ", ".join(sorted({f"{t.name} ({t.state})" for t in queued})[:3])
        text = (f"its constructor {task.name} is still running (creation task RUNNING), and calls to it wait "
                f"behind it: {calls}; an actor runs no method before its __init__ returns")
        b.g.constructing[node.key] = text
        node.evidence.append(text)
