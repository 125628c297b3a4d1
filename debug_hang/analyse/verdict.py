"""From stacks and state to a verdict: match each process, build the wait-for graph, find root
causes, and decide hang / no-hang / inconclusive. Pure: it reruns on recorded captures."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from debug_hang.analyse.crashloop import DEATH_PREFIX, DEATH_SOURCE, death_reason
from debug_hang.analyse.diagnosis import Diagnosis, Verdict
from debug_hang.analyse.graph import GraphInputs, WaitGraph, build_graph
from debug_hang.analyse.patterns import ProcessVerdict, catalog, match_process, settings
from debug_hang.analyse.progress import ProcessProgress, assess, loop_moved, progress_confidence, rules, summary_text
from debug_hang.analyse.rootcause import RootCause, chains, root_causes
from debug_hang.model import Collection, CollectionError, Process, ProcessRef
from debug_hang.redact import strip_controls
from debug_hang.rows import JobRow, Rows, TaskRow, tasks_of
from debug_hang.snapshot import POLLING_TASKS, Snapshot, available_resources, node_totals, resource_usage


def detect_progress(before: list[TaskRow], after: list[TaskRow], since_ms: float) -> list[str]:
    """Tasks that finished between two task listings: evidence the job moves.

    Only completions count: at the onset of a hang, calls still start (and then block).
    Actor creation is set-up, not progress; nor are the calls Ray's libraries make on a timer
    (Ray Train's status polls).
    """
    was = {t.key: t.state for t in before}
    moved: list[str] = []
    for task in after:
        if task.state != "FINISHED" or task.type == "ACTOR_CREATION_TASK" or task.name in POLLING_TASKS:
            continue
        if (task.key in was and was[task.key] != "FINISHED") or (task.key not in was and (task.end_time_ms or 0) >= since_ms):
            moved.append(f"{task.name} finished during the diagnosis")
    return moved


def stuck_processes(collection: Collection) -> dict[tuple[str | None, int | None], bool]:
    """Per process: True when every sample shows the same non-housekeeping stacks."""
    sigs: dict[tuple[str | None, int | None], set[tuple[Any, ...]]] = {}
    for proc in collection.processes:
        sig = tuple(sorted(
            tuple((f.function, f.line) for f in t.frames if not f.native)
            for t in proc.threads if t.name not in ("PythonGCThread", "ray_print_logs", "ray_listen_error_messages")
        ))
        sigs.setdefault(proc.ref, set()).add(sig)
    return {key: len(values) == 1 for key, values in sigs.items()}


def graph_inputs(job: dict[str, Any], snap: Snapshot, collection: Collection, rows: Rows | None = None) -> GraphInputs:
    """What the wait-for graph is built from: the job's state and each process's latest stack, matched."""
    rows = rows or Rows.of(snap)
    verdicts = [_match_with_cpu(p, collection) for p in collection.latest()]
    return GraphInputs(job=JobRow.of(job), actors=rows.actors, tasks=rows.tasks, placement_groups=rows.placement_groups,
                       node_totals=node_totals(snap), verdicts=verdicts, info=collection.info,
                       available=available_resources(snap), jobs=rows.jobs, now_s=snap.taken_at,
                       usage=resource_usage(snap), status_text=snap.cluster_status_text)


def analyse(job: dict[str, Any], snap: Snapshot, collection: Collection, tasks_after: list[dict[str, Any]] | None,
            address: str, job_choice: str, other_jobs: list[dict[str, Any]], errors: list[CollectionError],
            started: float) -> Diagnosis:
    """Everything after collection: match, graph, root causes, verdict. Pure: reruns on captures."""
    latest = collection.latest()
    rows = Rows.of(snap)
    inputs = graph_inputs(job, snap, collection, rows)
    verdicts = inputs.verdicts
    graph = build_graph(inputs)
    causes = root_causes(graph)
    since_ms = snap.taken_at * 1000.0
    progress = detect_progress(rows.tasks, tasks_of(tasks_after), since_ms) if tasks_after is not None else []
    stuck = stuck_processes(collection)
    waiting = {id(v.process) for v in verdicts if v.verdict in ("blocked", "busy")}  # one pass, not one per process
    moving = [p for p in latest if not stuck.get(p.ref, True) and id(p) in waiting]
    signals = progress_signals(graph, causes, verdicts, collection)
    verdict, summary = _verdict(inputs.job, causes, progress, moving, graph, verdicts, signals)
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
    elif verdict == "hang":
        _weigh_confidence(causes, signals, tasks_after is not None)
    return Diagnosis(address=address, job_id=job.get("job_id"), job_choice=job_choice, other_jobs=other_jobs,
                     verdict=verdict, summary=summary, snapshot=snap, collection=collection,
                     verdicts=verdicts, graph=graph, causes=causes, progress=progress, errors=errors,
                     seconds=time.monotonic() - started, signals=signals, uninspected=blind, rows=rows)


# Dump failures that leave a process unseen (not: it exited, it is not Python).
BLINDING_KINDS = ("pyspy-missing", "permission-denied", "dump-timeout", "bad-output", "pyspy-failed",
                  "helper-failed", "not-scheduled", "helper-crashed", "uninterruptible", "helper-error", "version-mismatch")
NEXT_STEP = {
    "dump-timeout": "rerun with --nonblocking (a process in uninterruptible sleep cannot be paused) or a larger --deadline",
    "bad-output": "check that py-spy on the node is 0.3.14 or newer (py-spy --version)",
    "pyspy-failed": "run py-spy dump --pid PID on the node by hand to see its full error",
    "helper-failed": "check that the node's Ray is healthy (ray status) and rerun",
    "not-scheduled": "the node could not start a helper process: check its load and rerun with a larger --deadline",
    "helper-crashed": "the helper's worker died on the node (OOM?): check the node and rerun",
    "uninterruptible": "rerun without --native: --nonblocking can read a process in uninterruptible sleep",
    "helper-error": "a failure of debug-hang's node helper, not of the job: see the report's first section",
    "version-mismatch": "install the cluster's Ray version beside debug-hang and rerun with it (the report's first section)",
}


def uninspected(job: JobRow, tasks: list[TaskRow], collection: Collection) -> list[dict[str, Any]]:
    """Processes of the job in unfinished calls (RUNNING tasks' workers, the driver) of which no
    stack was read because the dump failed (py-spy missing or refused, timed out, no helper),
    each with the failure that hid it."""
    wanted: dict[tuple[Any, int], str] = {}
    for t in tasks:
        if t.job_id == job.job_id and t.state == "RUNNING" and t.worker_pid:
            wanted[(t.node_id, t.worker_pid)] = t.name
    if job.driver_pid:
        wanted[(job.driver_node_id, job.driver_pid)] = "driver"
    seen = {p.pid for p in collection.processes}
    by_pid: dict[int, CollectionError] = {}
    by_node: dict[Any, CollectionError] = {}
    for err in collection.errors:
        if err.kind not in BLINDING_KINDS:
            continue
        if err.pid is not None:
            by_pid.setdefault(err.pid, err)
        else:
            by_node.setdefault(err.node_id, err)
    blind = []
    for (node_id, pid), what in wanted.items():
        if pid in seen:
            continue
        only = next(iter(by_node.values())) if len(by_node) == 1 else None
        cause = by_pid.get(pid) or by_node.get(node_id) or only
        if cause is not None:
            blind.append({"pid": pid, "node_id": node_id, "what": what, "kind": cause.kind,
                          "error": str(cause.error or "")})
    return blind


def blind_summary(job: JobRow, blind: list[dict[str, Any]], finding: str) -> str:
    """The summary of a diagnosis that could not look: the main failure and its fix first."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    for b in blind:
        kinds.setdefault(str(b["kind"]), []).append(b)
    kind, hits = max(kinds.items(), key=lambda kv: len(kv[1]))
    step = NEXT_STEP.get(kind, "")
    names = ", ".join(f"{strip_controls(b['what'] or 'process', newlines=False)[:80]} (pid {b['pid']})"
                      for b in blind[:4])
    return (f"Job {job.job_id}: inconclusive, the blocked processes could not be inspected. "
            f"{len(blind)} process(es) in unfinished calls have no stack ({names}"
            f"{', …' if len(blind) > 4 else ''}): {kind}: {hits[0]['error'][:400]}"
            f"{f' Next: {step}.' if step else ''} Without their stacks no verdict is possible "
            f"(from what could be read: {finding[:200]})")


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


def _weigh_confidence(causes: list[RootCause], signals: list[ProcessProgress], tasks_read: bool) -> None:
    """A hang's confidence moves with the independent readings of its culprits: each family read
    and silent (io, log, stack, cpu, and the task table) adds; a culprit that could not be read loses."""
    if not signals:
        return
    conf = rules().confidence
    by_pid = {ProcessRef(s.node_id, s.pid): s for s in signals}
    for cause in causes:
        # Live culprits only: a dead or restarting process has no window to be silent in.
        read = [by_pid[c.ref] for c in cause.culprits
                if c.ref in by_pid and c.state in ("blocked", "busy", "idle", "unknown")]
        if not read:
            continue
        if not all(s.read for s in read):
            cause.confidence -= conf.get("unread_penalty", 0.1)
            cause.evidence.append("progress readings missing for a culprit: silence not confirmed")
            continue
        silent = set.intersection(*(set(s.silent) for s in read)) | ({"tasks"} if tasks_read else set())
        cause.confidence = min(conf.get("hang_max", 0.97), cause.confidence + conf.get("silent_bonus", 0.02) * len(silent))
        window = max((s.window_s or 0.0) for s in read)
        cause.evidence.append(f"silent for {window:.1f}s on {len(silent)} independent signal(s): "
                              f"{', '.join(sorted(silent))} (no bytes written, no new log line, no task finished)")


def _signal_text(found: list[ProcessProgress], level: str) -> str:
    parts = [f"{s.name} {summary_text(s.deciding(level))}" for s in found[:2]]
    window = max((s.window_s or 0.0) for s in found)
    more = f" (and {len(found) - 2} more)" if len(found) > 2 else ""
    return "; ".join(parts) + more + f" in the {window:.1f}s window"


def _match_with_cpu(proc: Process, collection: Collection) -> ProcessVerdict:
    """Match a process, then weigh its real CPU use as the catalog's `cpu` rules say: a reading
    that needs CPU (a spin; py-spy's active flag flickers under load) is re-read as idle without
    it, a reading that holds only when idle (DDP's wait inside backward) is re-read without that
    pattern when the process computes."""
    verdict = match_process(proc)
    cpu = collection.info_of(proc).get("cpu_percent")
    rule = catalog()[verdict.pattern].cpu if verdict.pattern in catalog() else None
    if cpu is None or rule is None:
        return verdict
    threshold = settings().busy_cpu_percent
    if rule == "idle" and cpu >= threshold:
        verdict = match_process(proc, [p for p in catalog().values() if p.cpu != "idle"])
    elif rule == "busy" and cpu < threshold:
        # Re-read as idle, on a copy: the recorded stacks keep what py-spy said.
        idle = dataclasses.replace(proc, threads=[dataclasses.replace(t, active=False) for t in proc.threads])
        verdict = match_process(idle)
        verdict.process = proc
    return verdict


def busy_call_younger_than_before(causes: list[RootCause], tasks: list[TaskRow], now_ms: float) -> str:
    """A busy culprit (burning CPU, no cycle) whose running call has run for less time than an
    earlier call of the same function took to finish: a long computation, not yet a hang ("" if
    not so). Without an earlier finished call nothing is said."""
    if not causes or causes[0].cycle:
        return ""
    culprit = causes[0].culprits[0]
    if culprit.state != "busy" or not culprit.task_id:
        return ""
    running = next((t for t in tasks if t.task_id == culprit.task_id and t.state == "RUNNING"), None)
    if running is None or not running.start_time_ms:
        return ""
    took = [t.end_time_ms - t.start_time_ms for t in tasks
            if t.state == "FINISHED" and t.name == running.name and t.actor_id == running.actor_id
            and t.start_time_ms and t.end_time_ms]
    ran_s = (now_ms - running.start_time_ms) / 1000.0
    if not took or ran_s >= max(took) / 1000.0:
        return ""
    return (f"{culprit.label()} is busy in {running.name}, which has run {ran_s:.1f}s, while an earlier "
            f"{running.name} finished after {max(took) / 1000.0:.1f}s: a long computation this young is no "
            "hang yet. Diagnose again once it has run longer than that.")


def youngest_task_age_s(job_id: str | None, tasks: list[TaskRow], now_s: float) -> float | None:
    """Age of the most recently started RUNNING task of the job (None if none runs)."""
    starts = [t.start_time_ms or 0 for t in tasks if t.job_id == job_id and t.state == "RUNNING"
              and t.type != "ACTOR_CREATION_TASK" and t.name not in POLLING_TASKS]
    return (now_s * 1000.0 - max(starts)) / 1000.0 if starts else None


def _verdict(job: JobRow, causes: list[RootCause], progress: list[str], moving: list[Process],
             graph: WaitGraph, verdicts: list[ProcessVerdict],
             signals: list[ProcessProgress] | None = None) -> tuple[Verdict, str]:
    job_id = job.job_id
    if job.ended:
        return "no-hang", (f"Job {job_id} is not running: its status is {job.status}"
                           + (f" ({job.message[:200]})" if job.message else "") + ". Nothing of it can hang now.")
    if progress and not any(c.cycle for c in causes):
        return "no-hang", (f"Job {job_id} is making progress: {progress[0]}"
                           f"{f' (and {len(progress) - 1} more)' if len(progress) > 1 else ''}. "
                           "Its processes wait only for work in flight.")
    signals = signals or []
    cycle = any(c.cycle for c in causes)
    working = [s for s in signals if s.strongest() == "progress" and _can_move_the_job(s, causes, graph)]
    if working and not cycle:
        looked = (f" The stacks alone read as {causes[0].pattern} in {causes[0].culprits[0].label()}: it is working "
                  "between those waits." if causes else "")
        families = sorted({f.family for w in working for f in w.deciding("progress")})
        return "no-hang", (f"Job {job_id} is progressing: {_signal_text(working, 'progress')}.{looked} "
                           f"(confidence {progress_confidence(working)}: {' and '.join(families)} agree)")
    if not causes:
        blocked = [v for v in verdicts if v.verdict in ("blocked", "busy")]
        if not blocked:
            return "no-hang", (f"Job {job_id}: no process is blocked or busy in job code; "
                               "nothing waits on anything (idle, or between steps).")
        return "inconclusive", (f"Job {job_id}: {len(blocked)} process(es) wait, but the wait could not be "
                                "followed to a cause; see the blocked-task table and collect with --samples 5.")
    top = causes[0]
    names = ", ".join(c.label() for c in top.culprits)
    if all(c.culprits[0].state == "restarting" and c.pattern != "crash-loop" for c in causes):
        # It ran and died, and is being restarted or retried: not "starting", not yet a loop.
        first = top.culprits[0]
        loop = graph.crash_loops.get(first.actor_id or first.task_id or "")
        return "inconclusive", (f"Job {job_id}: {names} died and is being restarted or retried"
                                f"{f' ({loop.text()})' if loop else ''}. Diagnose again in a few seconds: "
                                "another death makes it a crash loop.")
    if all(c.culprits[0].kind == "resource" and c.culprits[0].state == "pending" for c in causes):
        # Free capacity and nothing else in the way: the scheduler has not placed it *yet*.
        waiting = ", ".join(c.label() for c in top.culprits[1:]) or "a task or actor"
        return "inconclusive", (f"Job {job_id} is still starting: {waiting} is not created or scheduled yet, and "
                                "the resources it needs are free, so nothing blocks it. Diagnose again in a few seconds.")
    moving_note = (f" Note: {len(moving)} process(es) changed stack between samples." if moving else "")
    title = (catalog()[top.pattern].title if top.pattern in catalog()
             else "A chain of waits ending in a process whose own wait is not recognised (see its evidence)")
    # Activity that need not be work counts on the culprits only: a victim's own threads (a
    # driver forwarding logs) do not say that the culprit will release it.
    culprit_pids = {(c.node_id, c.pid) for cause in causes for c in cause.culprits}
    active = [s for s in signals if s.strongest() == "activity" and (s.node_id, s.pid) in culprit_pids
              and not _only_earlier_activity(s, top.pattern)]
    if active and not cycle:
        return "inconclusive", (f"Job {job_id} may be hung ({title[:1].lower() + title[1:]} — culprit {names}), but "
                                f"{_signal_text(active, 'activity')}: it may still be working. A hang needs it "
                                "silent: diagnose again in a minute.")
    silent_reason = rules().inconclusive_when_silent.get(top.pattern)
    if silent_reason and not cycle:
        return "inconclusive", (f"Job {job_id}: {names} {silent_reason}. Not called a hang on its stack alone: "
                                "diagnose again with --samples 5 --interval 3, or watch its log and disk for a minute.")
    victims = len(top.victims)
    busy_note = (" A long computation looks the same in two samples: if the same line still spins in a minute, "
                 "it is a hang." if top.pattern == "busy-loop" else "")
    loop = graph.crash_loops.get(top.culprits[0].actor_id or top.culprits[0].task_id or "")
    if top.pattern == "crash-loop" and loop is not None:
        busy_note = f" {loop.text()}."
    return "hang", (f"Job {job_id} is hung: {title[:1].lower() + title[1:]} — culprit {names}; "
                    f"{victims} process(es) wait on it.{moving_note}{busy_note}")


def quote_deaths(diag: Diagnosis) -> None:
    """Once the evidence is in: each crash loop's death reason (from its dead workers' logs, or
    failing that the driver log) is quoted in its root cause and in the summary."""
    if diag.evidence is None:
        return
    for cause in diag.causes:
        if cause.pattern != "crash-loop":
            continue
        found = diag.evidence.per_node.get(cause.culprits[0].key)
        reason = next((h[len(DEATH_PREFIX):].split(DEATH_SOURCE)[0] for h in (found.highlights if found else [])
                       if h.startswith(DEATH_PREFIX)), None)
        if reason is None:
            lines = (found.highlights if found else []) + diag.evidence.driver_highlights
            reason = death_reason(lines)
        if not reason or any(reason in e for e in cause.evidence):
            continue
        cause.evidence.insert(0, f"{DEATH_PREFIX}{reason}")
        cause.summary += f" — dies of: {reason}"
        if diag.verdict == "hang" and cause is diag.causes[0]:
            diag.summary += f" Each attempt dies of: {reason}."


def _only_earlier_activity(signal: ProcessProgress, pattern: str) -> bool:
    """True when a culprit's only activity was logged before the window and its root cause shows
    that nothing can release the wait any more (verdict_rules.yaml: proven_stuck)."""
    r = rules()
    return pattern in r.proven_stuck and all(f.signal in r.before_window_signals for f in signal.deciding("activity"))


def _can_move_the_job(signal: ProcessProgress, causes: list[RootCause], graph: WaitGraph) -> bool:
    """Progress counts where it can release the waits: on a culprit, or on a process that is not
    itself blocked waiting on others. A blocked victim's writes (a library's periodic checkpoint of
    its own state, say Ray Tune's driver) do not move the job while what it waits on is stuck."""
    ref = ProcessRef(signal.node_id, signal.pid)
    if any(c.ref == ref for cause in causes for c in cause.culprits):
        return True
    node = graph.nodes.get(ref.key)
    return node is None or node.state != "blocked"
