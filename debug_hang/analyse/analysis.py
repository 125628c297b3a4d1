"""The whole analysis of one job, after collection: match every process's stack, build the
wait-for graph, find root causes, read the progress signals, and hand them to the verdict. Pure:
it reruns on recorded captures."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from debug_hang.analyse.busy import busy_threads, connect_retry, paced_threads, standing_threads
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.expiry import attach_expiries
from debug_hang.analyse.graph import GraphInputs, WaitGraph, build_graph
from debug_hang.analyse.library_progress import library_progress, library_work
from debug_hang.analyse.patterns import ProcessVerdict, ThreadMatch, catalog, match_process, match_thread, settings
from debug_hang.analyse.polls import poll_rounds
from debug_hang.analyse.progress import ProcessProgress, assess, loop_moved, summary_text
from debug_hang.analyse.rootcause import RootCause, chains, root_causes
from debug_hang.analyse.verdict import (
    at_work,
    blind_summary,
    busy_call_younger_than_before,
    decide,
    still_starting,
    uninspected,
    weigh_confidence,
)
from debug_hang.libraries import LibraryState
from debug_hang.model import Collection, CollectionError, Process, ProcessRef, Thread
from debug_hang.rows import JobRow, Rows, TaskRow, tasks_of
from debug_hang.snapshot import (
    DRIVER_TASK_PREFIX,
    POLLING_TASKS,
    Snapshot,
    available_resources,
    node_labels,
    node_totals,
    resource_usage,
    usage_by_node,
)


def detect_progress(before: list[TaskRow], after: list[TaskRow], since_ms: float,
                    machinery: Callable[[TaskRow], bool] | None = None, job_id: str | None = None) -> list[str]:
    """Tasks that finished between two task listings: evidence the job moves.

    Only completions count: at the onset of a hang, calls still start (and then block).
    Actor creation is set-up, not progress; nor are the calls Ray's libraries make on a timer
    (Ray Train's status polls), nor, where `machinery` says so, the calls Ray's libraries' own
    machinery makes (library_progress.py: Ray Data's executor and helper actors), nor, given the
    job's id, calls another job's driver made on the job's actors (the State API files an actor
    call under the actor's job: the dashboard answering this tool's own /api/data request calls
    Ray Data's stats actor from its own driver, once per diagnosis).
    """
    was = {t.key: t.state for t in before}
    moved: list[str] = []
    for task in after:
        if task.state != "FINISHED" or task.type == "ACTOR_CREATION_TASK" or task.name in POLLING_TASKS:
            continue
        if job_id is not None and called_by_other_driver(task, job_id):
            continue
        if machinery is not None and machinery(task):
            continue
        if (task.key in was and was[task.key] != "FINISHED") or (task.key not in was and (task.end_time_ms or 0) >= since_ms):
            moved.append(f"{task.name} finished during the diagnosis")
    return moved


def called_by_other_driver(task: TaskRow, job_id: str) -> bool:
    """The call was made by the driver of another job (its parent is that driver's task)."""
    parent = task.parent_task_id or ""
    return parent.startswith(DRIVER_TASK_PREFIX) and parent != DRIVER_TASK_PREFIX + job_id


def with_late_rows(rows: Rows, after: list[TaskRow] | None) -> Rows:
    """The rows the graph is built from: the first reading, plus the task rows only the second
    one had. Under load the State API shows a call's row late (the task events arrive in batches):
    a call that was already made, and waited on, is then missing from the first reading."""
    if not after:
        return rows
    seen = {t.key for t in rows.tasks}
    late = [t for t in after if t.key not in seen]
    return dataclasses.replace(rows, tasks=rows.tasks + late) if late else rows


def stuck_processes(collection: Collection) -> dict[tuple[str | None, int | None], bool]:
    """Per process: True when every sample shows the same stacks, Ray's own idle machinery
    (threads the catalog reads as benign) left out."""
    cat = catalog()
    sigs: dict[tuple[str | None, int | None], set[tuple[Any, ...]]] = {}
    for proc in collection.processes:
        sig = tuple(sorted(
            tuple((f.function, f.line) for f in t.frames if not f.native)
            for t in proc.threads if (m := match_thread(t).pattern) == "unknown" or cat[m].kind != "benign"
        ))
        sigs.setdefault(proc.ref, set()).add(sig)
    return {key: len(values) == 1 for key, values in sigs.items()}


def graph_inputs(job: dict[str, Any], snap: Snapshot, collection: Collection, rows: Rows | None = None) -> GraphInputs:
    """What the wait-for graph is built from: the job's state and each process's latest stack, matched."""
    rows = rows or Rows.of(snap)
    verdicts = [_connect_retried_at_once(_gil_held_across_samples(_match_with_cpu(p, collection), collection), collection)
                for p in collection.latest()]
    samples: dict[ProcessRef, list[Process]] = {}
    for proc in sorted(collection.processes, key=lambda p: p.sample):
        samples.setdefault(proc.ref, []).append(proc)
    return GraphInputs(job=JobRow.of(job), actors=rows.actors, tasks=rows.tasks, placement_groups=rows.placement_groups,
                       node_totals=node_totals(snap), verdicts=verdicts, info=collection.info,
                       available=available_resources(snap), jobs=rows.jobs, now_s=snap.taken_at,
                       usage=resource_usage(snap), usage_by_node=usage_by_node(snap), status_text=snap.cluster_status_text,
                       libraries=LibraryState.of(snap.libraries, collection.library_metrics), samples=samples,
                       dump_errors=list(collection.errors), node_labels=node_labels(snap))


def analyse(job: dict[str, Any], snap: Snapshot, collection: Collection, tasks_after: list[dict[str, Any]] | None,
            address: str, job_choice: str, other_jobs: list[dict[str, Any]], errors: list[CollectionError],
            started: float) -> Diagnosis:
    """Everything after collection: match, graph, root causes, verdict. Pure: reruns on captures."""
    latest = collection.latest()
    first = Rows.of(snap)
    after = tasks_of(tasks_after) if tasks_after is not None else None
    rows = with_late_rows(first, after)
    inputs = graph_inputs(job, snap, collection, rows)
    verdicts = inputs.verdicts
    graph = build_graph(inputs)
    causes = root_causes(graph)
    since_ms = snap.taken_at * 1000.0
    work = library_work(inputs)
    busy = busy_threads(verdicts, collection) + paced_threads(verdicts, collection)
    busy += standing_threads(graph, verdicts, collection, {w.ref for w in busy})
    attach_expiries(busy, collection)
    # A call a sleeping loop repeats, staying at its line, to a process idle in every sample, is a
    # round of its poll: no progress.
    stuck = stuck_processes(collection)
    quiet = {v.process.ref for v in verdicts if v.verdict == "idle" and stuck.get(v.process.ref, False)}
    is_round = poll_rounds(rows.tasks + (after or []), busy, quiet)

    def not_progress(task: TaskRow) -> bool:
        return work.not_progress(task) or is_round(task)

    progress = (detect_progress(first.tasks, after, since_ms, not_progress, inputs.job.job_id)
                if after is not None else [])
    progress += library_progress(inputs, work, {p.ref: p.label for p in latest})
    waiting = {id(v.process) for v in verdicts if v.verdict in ("blocked", "busy")}  # one pass, not one per process
    moving = [p for p in latest if not stuck.get(p.ref, True) and id(p) in waiting]
    signals = progress_signals(graph, causes, verdicts, collection)
    # Culprits seen working between samples (and starved demands whose holders are) are no root causes.
    working = [(c, text) for c in causes if (text := at_work(c, busy, rows.tasks))]
    starting = [(c, text) for c in causes if (text := still_starting(c, busy))]
    causes = [c for c in causes if all(c is not w for w, _ in working + starting)]
    verdict, summary = decide(inputs.job, causes, progress, moving, graph, verdicts, signals, busy, rows.tasks,
                              [text for _, text in working], [text for _, text in starting],
                              [c for c, _ in working + starting])
    placing = bool(causes) and all(c.culprits[0].kind == "resource" and c.culprits[0].state == "pending" for c in causes)
    is_starting = verdict == "inconclusive" and (placing or (not causes and bool(starting)))
    if verdict == "hang":
        young = busy_call_younger_than_before(causes, rows.tasks, snap.taken_at * 1000.0)
        if young:
            verdict, summary = "inconclusive", f"Job {inputs.job.job_id} may be hung, but {young}"
    blind = uninspected(inputs.job, rows.tasks, collection)
    moving_now = progress or any(sig.strongest() == "progress" for sig in signals)
    if blind and (verdict == "inconclusive" or (verdict == "no-hang" and not moving_now and not inputs.job.ended)):
        # A verdict needs evidence: "nothing is blocked" from processes nobody could look into
        # is no finding. Lead with what failed and how to fix it.
        verdict, summary = "inconclusive", blind_summary(inputs.job, blind, summary)
    if verdict == "no-hang":
        causes = []  # waits for work in flight are not root causes
        progress = progress + [f"{s.name} {summary_text(s.deciding('progress'))}" for s in signals
                               if s.strongest() == "progress"]
        progress += [text for _, text in working]
    elif verdict == "hang":
        weigh_confidence(causes, signals, tasks_after is not None)
        for cause in causes:
            cause.evidence[:0] = [w.text() for w in busy if any(c.ref == w.ref for c in cause.culprits)]
    return Diagnosis(address=address, job_id=job.get("job_id"), job_choice=job_choice, other_jobs=other_jobs,
                     verdict=verdict, summary=summary, snapshot=snap, collection=collection,
                     verdicts=verdicts, graph=graph, causes=causes, progress=progress, errors=errors,
                     seconds=time.monotonic() - started, signals=signals, uninspected=blind, rows=rows,
                     busy=busy, tasks_compared=tasks_after is not None, starting=is_starting)


def progress_signals(graph: WaitGraph, causes: list[RootCause], verdicts: list[ProcessVerdict],
                     collection: Collection) -> list[ProcessProgress]:
    """What each process that matters did in the sampling window: every process on a reported
    chain (victims and culprits), or, with no chain, every blocked or busy one. Empty when the
    capture holds no progress readings (an older capture, pasted dumps)."""
    if not any("progress" in v for v in collection.info.values()):
        return []
    wanted: list[tuple[str | None, int, str, str | None]] = []
    if causes:
        for chain in chains(graph, causes):
            wanted += [(n.node_id, n.pid, n.label(), n.pattern) for n, _ in chain if n.pid]
        wanted += [(c.node_id, c.pid, c.label(), c.pattern) for cause in causes for c in cause.culprits if c.pid]
    else:
        wanted = [(v.process.node_id, v.process.pid, v.process.label, v.pattern)
                  for v in verdicts if v.verdict in ("blocked", "busy") and v.process.pid]
    samples: dict[tuple[str | None, int | None], list[Process]] = {}
    for proc in collection.processes:
        samples.setdefault(proc.ref, []).append(proc)
    out: list[ProcessProgress] = []
    seen: set[ProcessRef] = set()
    for node_id, pid, name, pattern in wanted:
        ref = ProcessRef(node_id, pid)
        if ref in seen or ref not in collection.info:
            continue
        seen.add(ref)
        info = collection.info[ref]
        out.append(assess(node_id, pid, name, info.get("progress"), info.get("cpu_percent"), pattern,
                          loop_moved(sorted(samples.get(ref, []), key=lambda p: p.sample))))
    return out


def _gil_held_across_samples(verdict: ProcessVerdict, collection: Collection) -> ProcessVerdict:
    """A thread read as blocked while it holds the GIL (gil-holder-blocked) is so only when it holds
    it in every sample of its process at the same frame: one sample's holder is whichever thread
    had the GIL that instant (a metrics thread caught setting a gauge). Where the process was
    sampled more than once and the holder moved or let go, it is read again without that mark.
    (A pasted dump is one sample: its holder stands as the dump shows it.)"""
    if verdict.pattern != "gil-holder-blocked":
        return verdict
    holder = next((t for t, m in verdict.threads if m is verdict.main), None)
    samples = [p for p in collection.processes if p.ref == verdict.process.ref]
    if holder is None or len(samples) < 2:
        return verdict

    def where(thread: Thread) -> tuple[str, str, int | None] | None:
        frame = next((f for f in thread.frames if not f.native), None)
        return (frame.function, frame.file, frame.line) if frame is not None else None

    def held_by(sample: Process) -> Thread | None:
        other = match_process(sample)
        found = next((t for t, m in other.threads if m is other.main), None)
        return found if other.pattern == "gil-holder-blocked" else None

    same = [held_by(p) for p in samples]
    if all(t is not None and t.os_thread_id == holder.os_thread_id and where(t) == where(holder) for t in same):
        return verdict
    proc = verdict.process
    again = match_process(dataclasses.replace(proc, threads=[dataclasses.replace(t, owns_gil=False) if t is holder else t
                                                             for t in proc.threads]))
    again.process = proc
    return again


def _connect_retried_at_once(verdict: ProcessVerdict, collection: Collection) -> ProcessVerdict:
    """A thread read as waiting in a connect (io-wait) is read as a busy loop (busy-loop) when it
    retries that connect at once, across its samples, to a loopback port nothing listens on
    (busy.connect_retry: the loop ends only by the connect succeeding, its `except` only counts,
    the thread runs): refused at once, it never waits on the network; it spins. Read again on a
    copy of the thread marked running (the node saw it on a CPU; py-spy's flag may say idle in the
    connect system call); the recorded stacks keep what py-spy said. Any thread of the process: the
    deciding one, or one the in-process graph follows a wait to (the setter of an Event)."""
    if not any(m.pattern == "io-wait" for _t, m in verdict.threads):
        return verdict
    ordered = sorted((p for p in collection.processes if p.ref == verdict.process.ref), key=lambda p: p.sample)
    info = collection.info_of(verdict.process)
    busy_loop = catalog()["busy-loop"]
    threads: list[tuple[Thread, ThreadMatch]] = []
    main = verdict.main
    for thread, match in verdict.threads:
        key = thread.os_thread_id or thread.thread_id or thread.name
        seen = [t for p in ordered for t in p.threads if (t.os_thread_id or t.thread_id or t.name) == key]
        again = None
        if match.pattern == "io-wait" and connect_retry(seen, info) is not None:
            running = dataclasses.replace(thread, active=True)
            again = match_thread(running, [busy_loop])
        if again is None or again.pattern != "busy-loop":
            threads.append((thread, match))
            continue
        threads.append((running, again))
        if match is verdict.main:
            main = again
    if main is verdict.main and all(a is b for (_t, a), (_u, b) in zip(threads, verdict.threads, strict=True)):
        return verdict
    state = "busy" if main is not verdict.main else verdict.verdict
    return ProcessVerdict(verdict.process, threads, state, main)


def _match_with_cpu(proc: Process, collection: Collection) -> ProcessVerdict:
    """Match a process, then weigh its real CPU use as the catalog's `cpu` rules say: a reading
    that needs CPU (a spin; py-spy's active flag flickers under load) is re-read as idle without
    it, a reading that holds only when idle (DDP's wait inside backward) is re-read without that
    pattern when the process computes."""
    verdict = match_process(proc)
    info = collection.info_of(proc)
    cpu = info.get("cpu_percent")
    rule = catalog()[verdict.pattern].cpu if verdict.pattern in catalog() else None
    if cpu is None or rule is None:
        return verdict
    threshold = settings().busy_cpu_percent
    # A spin on a loaded node gets a share of a CPU and waits in the run queue the rest: it is
    # busy by the time its threads were runnable (on a CPU or ready for one), not by its share.
    threads = info.get("threads")
    runnable = info.get("runnable_percent") or max(
        (float(t.get("runnable") or 0.0) for t in (threads.values() if isinstance(threads, dict) else ())
         if isinstance(t, dict)), default=0.0)
    # (runnable only counts when the thread barely ever slept: a thread that wakes often on a
    # loaded node waits in the queue too, and is no spin)
    demand = max(float(cpu), float(runnable) if runnable >= settings().spin_runnable_percent else 0.0)
    if rule == "idle" and cpu >= threshold:
        verdict = match_process(proc, [p for p in catalog().values() if p.cpu != "idle"])
    elif rule == "busy" and demand < threshold:
        # Re-read as idle, on a copy: the recorded stacks keep what py-spy said. A thread py-spy saw
        # running does not become one that holds the GIL off the CPU (blocked in a C call that
        # kept it): it was runnable, and a small share of a loaded CPU is no block.
        idle = dataclasses.replace(proc, threads=[dataclasses.replace(t, active=False, owns_gil=t.owns_gil and not t.active)
                                                  for t in proc.threads])
        verdict = match_process(idle)
        verdict.process = proc
    return verdict
