"""Waits on Ray calls: a thread in ray.get / ray.wait / an awaited call to the unfinished tasks
it submitted and whoever runs them; streams read from a generator; supervisors of stuck actors;
Ray Train's report barrier."""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import HANDLERS, Builder, follows, graph_pass
from debug_hang.analyse.graph.edges import edge_of
from debug_hang.analyse.graph.model import PENDING_SCHED
from debug_hang.analyse.graph.resources import pending_pg_of, pg_node, resource_node
from debug_hang.analyse.graph.threads import cannot_signal, deciding_thread, frame_text, other_threads_in_job_code
from debug_hang.analyse.patterns import ThreadMatch, catalog, is_library
from debug_hang.facts import object_ids
from debug_hang.libraries import LIBRARY_FILE
from debug_hang.model import ProcessRef, Thread
from debug_hang.rows import TaskRow
from debug_hang.snapshot import BARRIER_TASK, DONE_STATES, POLLING_TASKS, WORKER_CLASS


@follows("submitted-tasks")
def follow_submitted(b: Builder, key: str) -> None:
    """A thread in ray.get / ray.wait / an awaited call: the tasks that create the objects it
    waits on when the dump names them (their ids), else the unfinished tasks it submitted."""
    if follow_object_ids(b, key):
        return
    proc = b.verdicts[key].process
    found = edges_from_parents(b, key, b.own_calls(key))
    if not found and proc.actor_id:
        # A thread the actor started itself submits with whatever task its main thread ran last
        # as parent (Ray Train's training thread: a finished status poll), so any task of this
        # actor may be the parent of what it waits for.
        own_ids = {str(t.task_id) for t in b.index.of_actor(proc.actor_id) if t.task_id}
        found = edges_from_parents(b, key, own_ids)
    mine = b.running.get(key, [])
    if not found and mine and b.g.nodes[key].pattern == "ray-get-wait" and not _get_from_library(b, key):
        # It waits on objects it did not create: ObjectRefs handed to it by its caller, whose
        # other unfinished tasks are the likely producers — those created before its own call
        # (an ObjectRef passed in existed when the call was made). A guess: such edges never make
        # a deadlock by themselves (rootcause.find_cycles leaves them out).
        callers = {str(t.parent_task_id) for t in mine}
        made = min((t.creation_time_ms for t in mine if t.creation_time_ms), default=None)
        edges_from_parents(b, key, callers, skip={str(t.task_id) for t in mine}, before_ms=made, guessed=True,
                            text="probably waits for {name} ({state}), started by its caller (an ObjectRef passed in)")


def _get_from_library(b: Builder, key: str) -> bool:
    """The ray.get is called by one of Ray's libraries (a Serve handle setting up its router, a
    Ray Data iterator), not by the job: the objects it waits on are the library's own, never ones
    the caller handed in."""
    thread = deciding_thread(b.verdicts[key])
    frames = [f for f in (thread.frames if thread else []) if not f.native]
    caller = next((f for f in frames if _RAY_CORE_FILE.search(f.file) is None), None)  # innermost first
    return caller is not None and LIBRARY_FILE.search(caller.file) is not None


_RAY_CORE_FILE = re.compile(r"(^|/)ray/_private/")  # ray.get itself and its wrappers


# Ray's own frames that hold the ObjectRefs a thread waits on (ray.get, ray.wait).
_RAY_WAIT_FILE = re.compile(r"ray/_private/worker\.py$")
_RAY_WAIT_FUNCTION = re.compile(r"^(Worker\.get_objects|get|wait)$")
NIL_ACTOR_UNIQUE = "f" * 24  # a normal task's TaskID holds a dummy ActorID: nil unique bytes + the job id


def waited_object_ids(b: Builder, key: str) -> list[str]:
    """The ids of the objects the process's deciding thread waits on in ray.get / ray.wait (read
    from its memory on the node: facts `ids(object_refs)`); [] when the dump does not say."""
    verdict = b.verdicts[key]
    thread = b.deciding.get(key) or deciding_thread(verdict)
    found: list[str] = []
    for frame in thread.frames if thread is not None else []:
        if frame.native or not (_RAY_WAIT_FILE.search(frame.file) and _RAY_WAIT_FUNCTION.search(frame.function)):
            continue
        for oid in object_ids(frame.facts):
            if oid not in found:
                found.append(oid)
    return found


def follow_object_ids(b: Builder, key: str) -> bool:
    """Exact edges of a ray.get / ray.wait: an ObjectID's first 24 bytes are the TaskID of the
    task that creates the object (Ray's id_specification.md), and an actor task's TaskID holds
    its ActorID. True when the wait's objects are known (edges made or not: no guess then)."""
    ids = waited_object_ids(b, key)
    if not ids:
        return False
    rows: dict[str, list[TaskRow]] = {}
    for task in b.inp.tasks:
        rows.setdefault(task.task_id, []).append(task)
    node = b.g.nodes[key]
    unknown: list[str] = []
    done: list[str] = []
    for oid in ids:
        task_id = oid[:48]
        attempts = sorted(rows.get(task_id, []), key=lambda t: t.attempt_number)
        if attempts:
            task = attempts[-1]
            if task.state in DONE_STATES:
                done.append(f"{task.name} {task.state}")
                continue
            dst = node_for_task(b, task)
            if dst == key and not self_call_blocks(b, key, task):
                continue  # its own actor, run by another of its threads (or one comes free for it)
            if dst is not None:  # its own actor too: a call queued behind the one that waits on it
                b.g.add_edge(key, dst, "ray-get-wait", f"waits for {task.name} ({task.state}), which creates object "
                             f"{oid[:12]}.. it waits on (the object id holds its task id)")
            continue
        actor_id = task_id[16:48]
        dst = b.actor_node.get(actor_id) if not actor_id.startswith(NIL_ACTOR_UNIQUE) else None
        if dst is not None:
            b.g.add_edge(key, dst, "ray-get-wait", f"waits for object {oid[:12]}.. of a call to {b.g.nodes[dst].name} "
                         "that the State API does not list (the object id holds the task id, the task id its actor)")
        else:
            unknown.append(oid[:12] + "..")
    waited = f"waits on {len(ids)} object(s) whose ids the dump shows"
    if done:
        node.evidence.append(f"{waited}; created by finished tasks: {', '.join(sorted(set(done))[:3])}")
    if unknown:
        node.evidence.append(f"{waited}; {len(unknown)} of them ({', '.join(unknown[:3])}) created by no task or actor "
                             "the State API lists (an object put by another process, a task of another job, or rows "
                             "not reported yet): not guessed from the calls it made")
    return True


@follows("own-calls")
def follow_own_calls(b: Builder, key: str) -> None:
    """A sleep loop around ray.wait(timeout=...) polls the calls it made: a wait on them; one that
    tests a child process's state polls its children."""
    node = b.g.nodes[key]
    if edges_from_parents(b, key, b.own_calls(key)):
        node.pattern = "ray-get-wait"
        node.evidence.append("polls in a sleep loop while calls it made are unfinished: it waits for them")
    else:
        from debug_hang.analyse.graph.children import follow_polled_children  # children.py imports this module

        if follow_polled_children(b, key):
            node.pattern = "child-process-wait"


STREAM_READER = re.compile(r"ray/_private/object_ref_generator\.py$")
_RAY_WAIT = re.compile(r"ray/_private/worker\.py$")
_CALLS_WAIT = re.compile(r"\bwait\s*\(")


def reads_stream(thread: Thread | None) -> bool:
    """The thread iterates an ObjectRefGenerator: inside Ray's Python generator (Ray 2.4x+), or,
    where Ray compiles the generator (2.9 to 2.3x: no frame of its own), in Ray's `wait` right
    under a job frame whose line makes no `wait(` call (`for ref in stream:`, `next(stream)`)."""
    if thread is None:
        return False
    if any(STREAM_READER.search(f.file) for f in thread.frames):
        return True
    frames = [f for f in thread.frames if not f.native]
    inner = next((i for i, f in enumerate(frames) if _RAY_WAIT.search(f.file) and f.name == "wait"), None)
    if inner is None:
        return False
    job = next((f for f in frames[inner + 1:] if not is_library(f)), None)
    return job is not None and bool(job.code) and not _CALLS_WAIT.search(job.code or "")


@graph_pass(after=("follow_edges",), decides=("stream-paced-producer",))
def mark_stream_pacing(b: Builder) -> None:
    """A sleep loop in a task whose submitter reads a stream (stream-paced-producer).

    A consumer iterating an ObjectRefGenerator waits for the next item of a generator task it
    submitted; a generator that sleeps between yields (a simulator, a rate limit) shows the same
    sleep in every sample, and no task finishes until the stream ends: its items are progress the
    State API does not show, and one sleep may outlast the window. Read as pacing, not as a poll
    that never ends.
    """
    for key, verdict in b.verdicts.items():
        if not reads_stream(deciding_thread(verdict)):
            continue
        for edge in b.g.out(key):
            node = b.g.nodes[edge.dst]
            if node.pattern == "poll-never-satisfied" and node.kind == "task":
                node.pattern = "stream-paced-producer"
                main = verdict.main
                node.evidence.append(
                    f"{b.g.nodes[key].label()} is reading a stream (ObjectRefGenerator) at "
                    f"{frame_text(main.user_frame if main else None)}: this task sleeps "
                    "between the items it yields; each item is progress no task state shows")


def node_for_task(b: Builder, task: TaskRow) -> str | None:
    """The graph node a waiting thread depends on, for one unfinished task it submitted."""
    g, node_totals = b.g, b.inp.node_totals
    if task.actor_id:
        # A call to an actor, or its creation: the actor (its process, or the pending actor).
        return b.actor_node.get(task.actor_id)
    loop = b.task_loops.get(str(task.task_id))
    live = past_its_retry(b, task) if loop is not None else None
    if live is not None:
        return live
    if loop is not None:
        # A task retried after each death: the loop is what the caller waits on, wherever the
        # current attempt is (pending, or running on a fresh worker).
        g.nodes.setdefault(loop.key, loop)
        return loop.key
    if task.state == "RUNNING" and task.worker_pid:
        return b.by_pid.get(ProcessRef(task.node_id, int(task.worker_pid)))
    if task.state in PENDING_SCHED:
        pg = pending_pg_of(task, b.inp.placement_groups)
        if pg is not None:
            # Scheduled into a placement group that is not placed: the group is what it waits for
            # (its resources show as Ray's internal CPU_group_<i>_<id> names).
            key = pg_node(g, pg, node_totals)
            g.nodes[key].evidence.append(f"task {task.name} is scheduled into it")
            if g.nodes[key].class_name is None:
                g.nodes[key].class_name = str(task.func_or_class_name or task.name)
            return key
        return resource_node(b, task.required_resources or {}, f"task {task.name}",
                             requester=str(task.func_or_class_name or task.name), since_ms=task.creation_time_ms,
                             selector=task.label_selector)
    return None


def past_its_retry(b: Builder, task: TaskRow) -> str | None:
    """The process of a task retried once after a death (a crash loop not confirmed) whose current
    attempt is RUNNING there, in the task's own frames: the retry is past its restart, and what it
    waits on is read from its stack, not "being retried". None: pending, not dumped, or idle."""
    loop = b.g.crash_loops.get(str(task.task_id))
    if loop is None or loop.confirmed or task.state != "RUNNING" or not task.worker_pid:
        return None
    key = b.by_pid.get(ProcessRef(task.node_id, int(task.worker_pid)))
    node = b.g.nodes.get(key) if key else None
    verdict = b.verdicts.get(key) if key else None
    if node is None or verdict is None or node.task_id != task.task_id or node.state not in ("blocked", "busy"):
        return None
    main = verdict.main
    if main is None or main.user_frame is None:
        return None  # not seen in the task's own code
    text = loop.text()
    if text not in node.evidence:
        node.evidence.append(f"{text}; attempt {task.attempt_number} runs in this process, at "
                             f"{frame_text(main.user_frame)}: past its restart")
    return key


def edges_from_parents(b: Builder, key: str, parents: set[str], skip: set[str] | None = None,
                       text: str = "waits for {name} ({state})", before_ms: float | None = None,
                       guessed: bool = False) -> int:
    """Edges from `key` to whatever runs the unfinished tasks submitted by `parents` (created
    before `before_ms`, when given); how many."""
    found = 0
    for task in b.index.children(parents):
        if task.state in DONE_STATES or task.name in POLLING_TASKS:
            continue
        if skip and task.task_id in skip:
            continue
        if before_ms is not None and (task.creation_time_ms is None or task.creation_time_ms >= before_ms):
            continue
        dst = node_for_task(b, task)
        if dst is None or (skip is not None and dst == key):
            continue
        if dst == key and not self_call_blocks(b, key, task):
            found += 1  # a wait it has, on another of its own threads: not guessed further
            continue
        found += 1
        b.g.add_edge(key, dst, "ray-get-wait", text.format(name=task.name, state=task.state), guessed=guessed)
    return found


@graph_pass(after=("detect_event_waits",))
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
        actor_id, task_id = task.actor_id, task.task_id
        if actor_id and task_id:
            own_tasks.setdefault(actor_id, set()).add(task_id)
            if task.type == "ACTOR_CREATION_TASK" and task.parent_task_id:
                created_by[actor_id] = task.parent_task_id
    for sup_id, sup_key in actor_node.items():
        sup = g.nodes[sup_key]
        if sup.pattern is not None or sup.state not in ("unknown", "idle") or g.out(sup_key) or not running.get(sup_key):
            continue
        doing = ", ".join(sorted({str(t.name) for t in running[sup_key]}))
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


@graph_pass(after=("edges_resource_holders",), decides=("train-barrier-wait",))  # its edges after the resource ones
def edges_train_barrier(b: Builder) -> None:
    """Ray Train's barrier: its SynchronizationActor waits for the ranks that have not called it.

    Each rank that reaches ray.train.report (or another barrier) has one RUNNING
    `broadcast_from_rank_zero` call on the actor; the rank that made it is the actor of the call's
    parent task. Every RayTrainWorker of the job without such a call is missing.
    """
    g, tasks, actors, actor_node = b.g, b.tasks, b.actors, b.actor_node
    by_id = {t.task_id: t for t in tasks}
    calls = [t for t in tasks if t.name == BARRIER_TASK and t.state == "RUNNING" and t.actor_id]
    workers = [aid for aid, a in actors.items() if a.class_name == WORKER_CLASS and aid in actor_node]
    for sync_id in sorted({str(t.actor_id) for t in calls}):
        sync_key = actor_node.get(sync_id)
        if sync_key is None:
            continue
        joined = {(by_id[t.parent_task_id].actor_id if t.parent_task_id in by_id else None) for t in calls if t.actor_id == sync_id}
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


# Ray's frames around every actor call a worker thread executes (a threaded actor's threads too).
_ACTOR_CALL_FRAME = re.compile(r"ray/(_private/function_manager|util/tracing/tracing_helper)\.py$")


# (builder, process, thread) whose self-call wait is being followed: threads waiting on each other's calls.
_FOLLOWING: set[tuple[int, str, int]] = set()


def runs_actor_call(thread: Thread) -> bool:
    """The thread executes a call of its actor (Ray's executor frames under the job's method)."""
    return any(not f.native and _ACTOR_CALL_FRAME.search(f.file) for f in thread.frames)


def _runs_method(thread: Thread, task: TaskRow) -> bool:
    """The thread is inside the job's frame of `task`'s method (`Class.method`, or `method`)."""
    name = str(task.name or "")
    method = name.rsplit(".", 1)[-1]
    return any(not f.native and not is_library(f) and f.function in (name, method) for f in thread.frames)


def self_call_blocks(b: Builder, key: str, task: TaskRow) -> bool:
    """A wait on a call to the waiter's own actor is a self-edge when that call cannot run while
    the wait lasts: queued behind it (a default actor has one thread; a threaded actor whose every
    thread waits), or handed to an event loop the wait itself blocks. On a threaded actor
    (max_concurrency > 1, concurrency groups) the call may run in another thread of the same
    process: the wait is followed to that thread (it stands for the process) and no self-edge is
    drawn; likewise while another thread of the actor runs and will free a slot for a queued one."""
    verdict = b.verdicts.get(key)
    waiter = b.deciding.get(key) or (deciding_thread(verdict) if verdict is not None else None)
    if verdict is None or waiter is None:
        return True
    others = [(t, m) for t, m in verdict.threads if t is not waiter and runs_actor_call(t)]
    node = b.g.nodes[key]
    if task.state == "RUNNING":
        runner = next(((t, m) for t, m in others if _runs_method(t, task)), None)
        if runner is None:
            return True  # no other thread runs it: an event loop the wait blocks, or one thread
        if runner[1].pattern == "lock-wait" and not [
                t for t in other_threads_in_job_code(verdict, waiter)
                if t is not runner[0] and not cannot_signal(t, runner[1].user_frame)]:
            # The call runs, but waits for a lock no third thread of the process could hold: the
            # waiter holds it across its wait for that very call (a log handler or callback that
            # calls its own actor under the lock): the two threads wait on each other.
            node.evidence.append(
                f"waits for {task.name} (RUNNING), a call on its own actor that thread "
                f"{runner[0].name or runner[0].os_thread_id} runs; that thread waits for a lock, and no other thread of "
                "this process but the waiter could hold it: the waiter holds it across this wait")
            return True
        mark = (id(b), key, id(runner[0]))
        if mark in _FOLLOWING:
            return True  # threads waiting on each other's calls: a cycle inside the actor
        _FOLLOWING.add(mark)
        try:
            _stand_for_runner(b, key, waiter, *runner, task)
        finally:
            _FOLLOWING.discard(mark)
        return False
    free = [t for t, _m in others if t.active]
    if free:
        node.evidence.append(
            f"waits for {task.name} ({task.state}), a call on its own actor queued for a free thread; "
            f"{len(free)} other thread(s) of this actor run calls and will free one")
        return False
    if others:
        node.evidence.append(
            f"waits for {task.name} ({task.state}), a call on its own actor queued behind the calls its "
            f"threads run; every one of those {len(others) + 1} threads waits (none computes): no thread "
            "comes free to run it")
    return True


def _stand_for_runner(b: Builder, key: str, waiter: Thread, runner: Thread, match: ThreadMatch,
                      task: TaskRow) -> None:
    """The thread running the awaited self-call decides the process: computing, the process is busy
    (read across its samples like any busy process); waiting, that wait is the process's."""
    node = b.g.nodes[key]
    node.evidence.append(
        f"thread {waiter.name or waiter.os_thread_id} waits for {task.name} (RUNNING), a call on its own actor "
        f"that thread {runner.name or runner.os_thread_id} of this process runs (a threaded actor: "
        "max_concurrency > 1 or a concurrency group): not queued behind the wait, followed to that thread")
    b.deciding[key] = runner
    node.frame = match.frame or next((f for f in runner.frames if not f.native), None)
    node.user_frame = match.user_frame
    pattern = catalog().get(match.pattern) if match.pattern != "unknown" else None
    if runner.active and (pattern is None or pattern.kind == "benign" or pattern.id == "busy-loop"):
        node.pattern, node.state = "busy-loop", "busy"
        node.evidence.append(f"thread {runner.name or runner.os_thread_id} runs at {frame_text(node.user_frame or node.frame)}")
    elif pattern is not None and pattern.kind != "benign":
        node.pattern, node.state = pattern.id, "blocked"
        handler = HANDLERS.get(edge_of(b, key))
        if handler is not None:
            handler.run(b, key)  # that thread's wait, followed as the process's
    else:
        node.pattern, node.state = None, "unknown"


POLL_ROUNDS = 2  # the same call, finished this many times for one caller, is a poll's repetition


def poll_targets(b: Builder, key: str) -> dict[str, list[TaskRow]]:
    """The calls a process repeats, by the actor they go to: calls of one method that its running
    tasks made and that FINISHED at least POLL_ROUNDS times (a loop asking the same question)."""
    own = b.own_calls(key)
    rounds: dict[tuple[str, str, str], list[TaskRow]] = {}
    for task in b.tasks:
        if task.parent_task_id in own and task.actor_id and task.type != "ACTOR_CREATION_TASK":
            rounds.setdefault((str(task.parent_task_id), task.name, task.actor_id), []).append(task)
    out: dict[str, list[TaskRow]] = {}
    for (_, _, actor_id), calls in rounds.items():
        if sum(t.state == "FINISHED" for t in calls) >= POLL_ROUNDS:
            out.setdefault(actor_id, []).extend(calls)
    return out


@graph_pass(after=("mark_stream_pacing",), decides=("actor-restart-lost-state",))
def follow_polls_to_restarted_actors(b: Builder) -> None:
    """A poll of an actor that restarted, whose only calls since are the poll's rounds
    (actor-restart-lost-state).

    A caller that sleeps in a loop (or waits on one round of it) and asks an actor the same
    question again and again gets the same answer while nothing changes the actor's state. An
    actor restarted by Ray ran its constructor again: what earlier calls put into it (its
    registrations, counters, flags) is gone. If every call it received since the poll began is a
    round of that poll (no other caller, nothing queued or running on it but the poll), nothing
    alive can change the answer: the restart that lost the state is where the fix goes.
    """
    for key in b.verdicts:
        node = b.g.nodes[key]
        for actor_id, calls in poll_targets(b, key).items():
            actor, dst = b.actors.get(actor_id), b.actor_node.get(actor_id)
            if actor is None or dst is None or dst == key or not actor.num_restarts or actor.state != "ALIVE":
                continue
            if not (node.pattern == "poll-never-satisfied" or any(e.dst == dst for e in b.g.out(key))):
                continue  # not polling now (it left the loop, or waits on something else)
            mine = {t.key for t in calls}
            first = min((t.creation_time_ms or t.start_time_ms or 0.0) for t in calls)
            others = [t for t in b.index.of_actor(actor_id) if t.key not in mine and t.type != "ACTOR_CREATION_TASK"
                      and (t.state not in DONE_STATES or (t.end_time_ms or 0.0) >= first)]
            if others:
                continue  # another call may change what the poll reads
            target = b.g.nodes[dst]
            if target.state not in ("idle", "blocked", "unknown") and target.pattern not in (None, "idle-no-work"):
                continue
            name = calls[0].name
            done = sum(t.state == "FINISHED" for t in calls)
            if not any(e.dst == dst for e in b.g.out(key)):
                b.g.add_edge(key, dst, "poll-never-satisfied",
                             f"polls {name} in a loop: {done} rounds FINISHED and it is still in the loop")
            target.pattern = "actor-restart-lost-state"
            target.state = "idle"
            target.evidence.append(
                f"restarted {actor.num_restarts} time(s) (num_restarts in its actor row): its constructor ran again "
                f"and state earlier calls put into it is gone; since {node.label()} began polling {name} "
                f"({done} rounds finished, the same answer each time: the caller is still in its loop), no other "
                "call reached it and none is running or queued: nothing alive can change the answer")
