"""The verdict from what the analysis found (analysis.py): hang, no-hang or inconclusive, why,
and how sure; processes that could not be looked into; crash loops' death reasons. Pure."""

from __future__ import annotations

import re
from typing import Any

from debug_hang.analyse.busy import BusyWork
from debug_hang.analyse.crashloop import DEATH_PREFIX, DEATH_SOURCE, death_reason
from debug_hang.analyse.dead_holders import retried_poll_text
from debug_hang.analyse.diagnosis import Diagnosis, Verdict
from debug_hang.analyse.expiry import ANSWER, PAST_GRACE_S, scheduled_release
from debug_hang.analyse.graph import WaitGraph
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.processes import stopped_by_signal
from debug_hang.analyse.graph.sockets import accept_wait, listening_port
from debug_hang.analyse.patterns import ProcessVerdict, catalog
from debug_hang.analyse.progress import ProcessProgress, progress_confidence, rules, summary_text
from debug_hang.analyse.rootcause import RootCause
from debug_hang.model import Collection, CollectionError, Process, ProcessRef
from debug_hang.rows import JobRow, TaskRow
from debug_hang.snapshot import POLLING_TASKS
from debug_hang.untrusted import strip_controls

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
    # Read, though not dumped: a process stopped by a signal (its /proc state says why py-spy failed).
    seen = {p.pid for p in collection.processes} | {ref.pid for ref, info in collection.info.items() if stopped_by_signal(info)}
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




def weigh_confidence(causes: list[RootCause], signals: list[ProcessProgress], tasks_read: bool) -> None:
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


def holders_at_work(cause: RootCause, busy: list[BusyWork], tasks: list[TaskRow]) -> list[BusyWork]:
    """For a demand starved of resources: the running calls that hold them and compute (their
    threads run job code and are no spin). A demand waiting for calls that work waits for work."""
    demand = cause.culprits[0]
    if demand.kind != "resource" or demand.state != "starved":
        return []
    wanted = set(re.findall(r"([A-Za-z_][\w:]*): ", demand.name))
    holders = {ProcessRef(t.node_id, t.worker_pid) for t in tasks if t.state == "RUNNING" and t.worker_pid
               and any(float(t.required_resources.get(r, 0)) > 0 for r in wanted)}
    return [w for w in busy if w.ref in holders and w.state in ("advancing", "no-spin")]


def _culprit_work(cause: RootCause, busy: list[BusyWork]) -> BusyWork | None:
    """The culprit's thread across its samples, when its reading is a busy thread (or an
    unrecognised wait whose thread runs job code) or a sleep in a loop."""
    culprit = cause.culprits[0]
    work = next((w for w in busy if w.ref == culprit.ref), None)
    if work is None or cause.cycle:
        return None
    if culprit.state == "busy" or (culprit.state == "unknown" and not work.sleeping):
        return work
    return work if work.sleeping and culprit.state == "blocked" else None


def at_work(cause: RootCause, busy: list[BusyWork], tasks: list[TaskRow]) -> str:
    """What shows a root cause's culprit working ("" when nothing does): its thread seen to advance
    between samples, or, for a demand starved of resources, running calls that hold them and
    advance. Such a cause is no root cause: what waits on it waits for work in flight."""
    if cause.pattern in rules().own_work_no_release:
        return ""
    work = _culprit_work(cause, busy)
    if work is not None and work.state == "advancing":
        return work.text()
    if cause.cycle:
        return ""
    holders = [w for w in holders_at_work(cause, busy, tasks) if w.state == "advancing"]
    if holders:
        return (f"{cause.culprits[0].label()} waits for resources that running calls hold while they compute "
                f"({'; '.join(w.text() for w in holders[:2])}); it is scheduled when one of them ends")
    return ""


def still_starting(cause: RootCause, busy: list[BusyWork]) -> str:
    """What shows a root cause's culprit still starting up ("" when nothing does): its busy thread
    imports modules. Such a cause is no root cause yet: its work, or its wait, has not begun."""
    work = _culprit_work(cause, busy)
    return work.text() if work is not None and work.starting else ""


def _waits_each_round(work: BusyWork) -> bool:
    """A sleeping loop with no test and no exit of its own that calls out every round (`while True:`
    around a `q.get()` and a sleep): it is fed work, not polling a condition (a retry loop that
    breaks once a call succeeds polls one); whether it moves is not seen."""
    loop = work.loop
    return loop is not None and not loop.tests and bool(loop.calls) and loop.body_calls and not loop.exits


def _polls_outside_state(work: BusyWork) -> bool:
    """A sleeping poll whose loop tests its condition through calls (a file's existence, a
    service's answer: state outside the process), not only its own variables."""
    return work.loop is not None and work.loop.kind == "unknown" and bool(work.loop.calls)


# Task states of calls about to start (placed, or being placed, on a worker): the process that runs
# one may yet bind a port, connect, write a file. Not PENDING_ARGS_AVAIL: a call waiting for its
# arguments may wait on the very process that waits.
_ABOUT_TO_RUN = frozenset({"PENDING_NODE_ASSIGNMENT", "PENDING_OBJ_STORE_MEM_AVAIL", "PENDING_ARGS_FETCH",
                           "SUBMITTED_TO_WORKER", "PENDING_ACTOR_TASK_ARGS_FETCH"})


def may_release(waiter: ProcessRef, busy: list[BusyWork], tasks: list[TaskRow], job_id: str | None) -> list[str]:
    """For a wait whose releaser is not identified — a poll of state outside the process, a
    connect retried to a port nobody listens on yet, an accept on a listening socket (any
    process may connect) — the rest of the job that may release it: other processes busy and no
    spin (advancing, a computation no spin, or not decided: a CPU in job code), processes still
    starting (importing), actors being created and calls about to run. Advancing work first.
    Empty when nothing else of the job could: then the wait is a hang (or the retry a livelock)."""
    found = [w.text() for w in sorted(busy, key=lambda w: w.state != "advancing")
             if w.ref != waiter and not w.sleeping and (w.starting or w.state in ("advancing", "no-spin", "undecided"))]
    own = {t.actor_id for t in tasks if t.worker_pid == waiter.pid and t.actor_id}
    starting = [t for t in tasks if t.job_id == job_id and t.worker_pid != waiter.pid
                and not (t.actor_id and t.actor_id in own)
                and ((t.type == "ACTOR_CREATION_TASK" and t.state not in ("FINISHED", "FAILED", "PENDING_ARGS_AVAIL"))
                     or t.state in _ABOUT_TO_RUN)]
    if starting:
        names = ", ".join(sorted({t.name for t in starting})[:3])
        found.append(f"{len(starting)} call(s) of the job are starting or about to run ({names})")
    return found


def _accept_decision(job_id: str | None, top: RootCause, names: str, busy: list[BusyWork],
                     tasks: list[TaskRow]) -> tuple[Verdict, str] | None:
    """A wait for a connection on a listening socket (`sockets.accept_wait`) has no peer to
    follow: any live process, of the job or outside it, may be the one that connects. It is a
    hang only when nothing else of the job works or starts (`may_release`); else inconclusive,
    naming that work as the likely client. None when the culprit waits for no connection."""
    culprit = top.culprits[0]
    if top.cycle or culprit.state != "blocked" or not accept_wait(culprit):
        return None
    others = may_release(culprit.ref, busy, tasks, job_id)
    if not others:
        return None
    port = listening_port(culprit)
    on = f" on {port}" if port else ""
    return ("inconclusive", f"Job {job_id} may be hung, but {names} waits for a connection{on} (an accept on a "
                            f"listening socket: no peer yet to follow), while {'; '.join(others[:2])}: that work may "
                            "be the client, which connects once it is done. An accept is a hang only when nothing "
                            "that could connect is left: diagnose again once that work ends.")


def _peer_decision(job_id: str | None, top: RootCause, names: str, busy: list[BusyWork]) -> tuple[Verdict, str] | None:
    """A socket read with several TCP peers on its node, which one it reads not known
    (`GNode.peers`), while one of them works - computes, or sleeps in a loop that changes what it
    tests (a throttled sender pacing its bytes): that peer may be sending. /proc/PID/io counts no
    socket bytes, so the reader's silence proves nothing: inconclusive, never io-wait's hang.
    None when no peer of it is seen working."""
    culprit = top.culprits[0]
    if top.cycle or top.pattern != "io-wait" or culprit.state != "blocked" or not culprit.peers:
        return None
    working = [w for w in busy if w.ref.node_id == culprit.node_id and w.ref.pid in culprit.peers
               and (w.starting or w.state in ("advancing", "no-spin", "undecided"))]
    if not working:
        return None
    return ("inconclusive", f"Job {job_id} may be hung, but {names} reads a TCP connection one of whose peers on its node "
                            f"works: {working[0].text()}. That peer may be sending it the bytes it waits for (a socket's "
                            "bytes are not in /proc/PID/io, so the reader's silence proves nothing): diagnose again once "
                            "that work ends, or read the connection's byte counters (`ss -tin`).")


def _released_decision(job_id: str | None, top: RootCause, title: str, names: str) -> tuple[Verdict, str] | None:
    """A culprit whose wait a timer ends (`GNode.release`: a child asleep in nanosleep): a scheduled
    release, inconclusive, never a hang (None: no culprit has one)."""
    own = catalog().get(top.pattern)
    released = [c for c in top.culprits if c.release]
    if not released or own is None or own.kind != "root-cause":
        return None  # an unfollowed end with a release is told by _unfollowed_end
    return "inconclusive", (f"Job {job_id} may be hung ({title[:1].lower() + title[1:]} — culprit {names}), but "
                            f"{released[0].label()} waits on {released[0].release}. A wait that ends by itself is "
                            "no hang: diagnose again once it is due (a wait still there after that is worth a look).")


def _receiving_decision(job_id: str | None, top: RootCause, names: str) -> tuple[Verdict, str] | None:
    """A culprit whose connection still delivers data (`GNode.receiving`, the kernel's tcp_info: a
    socket read, an event loop's connection, a native child's): its peer is alive and sending,
    slowly - a throttled download, a paced stream. Data
    coming says nothing of when the read ends, and a peer may send heartbeats while what was asked
    never comes: inconclusive, never io-wait's hang. None when its connection is silent or unread."""
    culprit = top.culprits[0]
    if top.cycle or not culprit.receiving:
        return None
    return ("inconclusive", f"Job {job_id} may be hung, but {names} {culprit.receiving}: the peer is alive and "
                            "sending, slowly (a throttled download, a paced stream). A read is a hang only once its "
                            "connection is silent: diagnose again in a minute (the last data's age grows while "
                            "nothing comes), or watch `ss -tin` for its bytes_received.")


def _accept_note(top: RootCause, tasks: list[TaskRow], job_id: str | None) -> str:
    """For a hang on an accept: nothing of the job could connect, and the calls that ended while
    it waited (after its own call began) without connecting: the likely client, gone."""
    culprit = top.culprits[0]
    if top.cycle or not accept_wait(culprit):
        return ""
    mine = [t for t in tasks if t.worker_pid == culprit.pid and t.state == "RUNNING" and t.start_time_ms]
    began = min((t.start_time_ms or 0.0 for t in mine), default=None)
    own = {t.actor_id for t in tasks if t.worker_pid == culprit.pid and t.actor_id}
    ended = sorted({f"{t.name} ({t.state})" for t in tasks if t.job_id == job_id and t.state in ("FINISHED", "FAILED")
                    and t.type != "ACTOR_CREATION_TASK" and t.worker_pid != culprit.pid
                    and not (t.actor_id and t.actor_id in own)
                    and began is not None and t.end_time_ms is not None and t.end_time_ms > began})
    gone = f"; the calls of the job that ended while it waited, none of which connected: {', '.join(ended[:3])}" if ended else ""
    port = listening_port(culprit)
    return (f" It waits for a connection{f' on {port}' if port else ''} (an accept on a listening socket), and no "
            f"other process of the job works or is starting that could connect{gone}.")


def _busy_decision(job_id: str | None, top: RootCause, title: str, busy: list[BusyWork],
                   tasks: list[TaskRow]) -> tuple[tuple[Verdict, str] | None, BusyWork | None]:
    """A busy culprit is a hang only with positive evidence that it does not advance; a sleep in a
    loop only when the loop polls a condition nothing in it changes; a demand starved of resources
    held by busy calls only when they are seen not to advance. (Culprits seen to advance were set
    aside before: `at_work`.) Returns the decision (None: go on) and the culprit's spin, if any."""
    culprit = top.culprits[0]
    names = ", ".join(c.label() for c in top.culprits)
    if top.pattern in rules().own_work_no_release:
        return None, None  # its work, seen or not, is not what its waiters wait for
    work = _culprit_work(top, busy)
    lead = f"Job {job_id} may be hung ({title[:1].lower() + title[1:]} — culprit {names}), but"
    if work is not None and work.sleeping:
        if work.state == "no-spin" or (work.state == "undecided" and _waits_each_round(work)):
            return ("inconclusive", f"{lead} {work.text()}. A hang needs a poll whose condition nothing changes."), None
        others = may_release(work.ref, busy, tasks, job_id) if _polls_outside_state(work) else []
        if work.state == "undecided" and others:
            return ("inconclusive", f"{lead} {work.text()}; its loop reads its condition through calls "
                                    f"({', '.join(work.loop.calls[:3]) if work.loop else ''}), state outside its own "
                                    f"variables, while {'; '.join(others[:2])}: that work may change "
                                    "what it reads. A hang needs a poll whose condition nothing changes."), None
        return None, work if work.state == "spin" else None
    if culprit.state == "busy" or work is not None:
        if work is None or work.state != "spin":
            seen = work.text() if work is not None else f"{names} is busy, and its thread could not be followed across samples"
            return ("inconclusive", f"{lead} {seen}. A hang needs it seen not to advance: the same loop, its state "
                                    "unchanged, nothing in it that can end it."), None
        binders = may_release(work.ref, busy, tasks, job_id) if work.retry is not None and not work.retry.backoff else []
        if binders:
            retry = work.retry
            ports = ", ".join(str(p) for p in retry.ports) if retry is not None else "?"
            return ("inconclusive", f"{lead} {work.label} retries at once at {work.where()} (`{retry.header if retry else ''}`, "
                                    f"its `except` only counts), and nothing listens on loopback port {ports} it dials "
                                    f"*now*, while {'; '.join(binders[:2])}: that work may yet bind and listen on that "
                                    "port (a server that computes before it listens), and the connect then succeeds. "
                                    "A retry to a port nobody listens on is a livelock only when nothing else of the "
                                    "job could bind it: diagnose again once that work is done."), None
        return None, work
    holders = holders_at_work(top, busy, tasks)
    if holders:
        return ("inconclusive", f"Job {job_id}: {culprit.label()} waits for resources that running calls hold, and "
                                f"they are busy: {'; '.join(w.text() for w in holders[:2])}. A hang needs them seen "
                                "not to advance."), None
    return None, None


def decide(job: JobRow, causes: list[RootCause], progress: list[str], moving: list[Process],
             graph: WaitGraph, verdicts: list[ProcessVerdict],
             signals: list[ProcessProgress] | None = None, busy: list[BusyWork] | None = None,
             tasks: list[TaskRow] | None = None, at_work_seen: list[str] | None = None,
             starting_seen: list[str] | None = None, set_aside: list[RootCause] | None = None) -> tuple[Verdict, str]:
    """The verdict and its summary. `causes` are the root causes left once those whose culprit was
    seen working (`at_work_seen`: what showed it, see `at_work`) or still starting (`starting_seen`,
    see `still_starting`) were set aside (`set_aside`: their culprits' progress still moves the job)."""
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
    movers = causes + (set_aside or [])
    working = [s for s in signals if s.strongest() == "progress" and _can_move_the_job(s, movers, graph)]
    if working and not cycle:
        looked = (f" The stacks alone read as {causes[0].pattern} in {causes[0].culprits[0].label()}: it is working "
                  "between those waits." if causes else "")
        families = sorted({f.family for w in working for f in w.deciding("progress")})
        return "no-hang", (f"Job {job_id} is progressing: {_signal_text(working, 'progress')}.{looked} "
                           f"(confidence {progress_confidence(working)}: {' and '.join(families)} agree)")
    if not causes:
        return _without_causes(job_id, verdicts, at_work_seen or [], starting_seen or [])
    top = causes[0]
    names = ", ".join(c.label() for c in top.culprits)
    if all(c.culprits[0].state == "restarting" and c.pattern != "crash-loop" for c in causes):
        # It ran and died, and is being restarted or retried: not "starting", not yet a loop.
        first = top.culprits[0]
        loop = graph.loop_of(first)
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
    # A poll whose wait ends at a time its loop holds (a lease's expiry), or a retry's poll whose
    # holder is not named: not a hang yet.
    retried = None if cycle else (_scheduled_release_text(job_id, top, busy or [])
                                  or retried_poll_text(job_id, top, graph))
    if retried:
        return "inconclusive", retried
    # A busy culprit is read before the chain's end: it runs, it waits on nothing unseen; its spin
    # (the same loop, state unchanged, nothing in it that can end it) is the positive evidence.
    decided, spin = (None, None) if cycle else _busy_decision(job_id, top, title, busy or [], tasks or [])
    if decided is not None:
        return decided
    accepting = None if cycle else _released_decision(job_id, top, title, names) \
        or _accept_decision(job_id, top, names, busy or [], tasks or []) \
        or _peer_decision(job_id, top, names, busy or []) or _receiving_decision(job_id, top, names)
    if accepting is not None:
        return accepting
    unfollowed = "" if spin is not None else _unfollowed_end(job_id, top, names)
    if unfollowed:
        return "inconclusive", unfollowed
    # Activity that need not be work counts on the culprits only: a victim's own threads (a
    # driver forwarding logs) do not say that the culprit will release it.
    culprit_pids = {(c.node_id, c.pid) for cause in causes for c in cause.culprits}
    active = [s for s in signals if s.strongest() == "activity" and (s.node_id, s.pid) in culprit_pids
              and not _only_earlier_activity(s, top.pattern) and not _loop_activity(top, graph)]
    if active and not cycle:
        return "inconclusive", (f"Job {job_id} may be hung ({title[:1].lower() + title[1:]} — culprit {names}), but "
                                f"{_signal_text(active, 'activity')}: it may still be working. A hang needs it "
                                "silent: diagnose again in a minute.")
    silent_reason = rules().inconclusive_when_silent.get(top.pattern)
    if silent_reason and not cycle:
        return "inconclusive", (f"Job {job_id}: {names} {silent_reason}. Not called a hang on its stack alone: "
                                "diagnose again with --samples 5 --interval 3, or watch its log and disk for a minute.")
    victims = len(top.victims)
    busy_note = f" {spin.text()}." if spin is not None else ""
    if spin is not None:  # a spin's line moves within its loop: that is no movement
        moving = [p for p in moving if p.ref != spin.ref]
        moving_note = f" Note: {len(moving)} process(es) changed stack between samples." if moving else ""
    loop = graph.loop_of(top.culprits[0])
    if top.pattern == "crash-loop" and loop is not None:
        busy_note = f" {loop.text()}."
    accept_note = _accept_note(top, tasks or [], job_id)
    return "hang", (f"Job {job_id} is hung: {title[:1].lower() + title[1:]} — culprit {names}; "
                    f"{victims} process(es) wait on it.{accept_note}{moving_note}{busy_note}")


def _scheduled_release_text(job_id: str | None, top: RootCause, busy: list[BusyWork]) -> str | None:
    """The inconclusive verdict of a poll whose wait ends by itself at a time its loop holds: a
    lease's recorded expiry ahead, a deadline it tests (None: not that; analyse/expiry.py)."""
    culprit = top.culprits[0] if top.culprits else None
    found = scheduled_release(busy, culprit.ref) if culprit is not None and culprit.pid else None
    if culprit is None or found is None:
        return None
    work, expiry = found
    then = ("what it polls for - a lease or claim recorded with a TTL - expires then whoever holds it, alive or "
            "dead, and its poll should then succeed" if expiry.how == ANSWER else "its loop ends by the clock then")
    return (f"Job {job_id} may be hung, but its wait ends by itself: {culprit.label()} polls at {work.where()}, and "
            f"{expiry.text()}: {then}. A hang needs the poll still failing more than {PAST_GRACE_S:.0f} s past that "
            "time, or the time moved on between readings (the claim renewed): diagnose again after it.")


def _without_causes(job_id: str | None, verdicts: list[ProcessVerdict], at_work_seen: list[str],
                    starting_seen: list[str]) -> tuple[Verdict, str]:
    """The verdict when no root cause is left: still starting, computing (causes set aside because
    their culprits work), idle, or waits that could not be followed."""
    if starting_seen:
        return "inconclusive", (f"Job {job_id} is still starting: {starting_seen[0]}. Nothing else was found "
                                "waiting; diagnose again in a few seconds.")
    if at_work_seen:
        return "no-hang", (f"Job {job_id} is computing, not hung: {at_work_seen[0]}"
                           f"{f' (and {len(at_work_seen) - 1} more)' if len(at_work_seen) > 1 else ''}. "
                           "What waits on it waits for work in flight.")
    blocked = [v for v in verdicts if v.verdict in ("blocked", "busy")]
    if not blocked:
        return "no-hang", (f"Job {job_id}: no process is blocked or busy in job code; "
                           "nothing waits on anything (idle, or between steps).")
    return "inconclusive", (f"Job {job_id}: {len(blocked)} process(es) wait, but the wait could not be "
                            "followed to a cause; see the blocked-task table and collect with --samples 5.")


_SIGNAL_CALL = re.compile(r"(?:\bsignal\.|(?<![\w.]))(sigwait|sigwaitinfo|sigtimedwait|pause)\(")
_SIGNAL_NAME = re.compile(r"\bSIG[A-Z0-9]{2,8}\b")


def _signal_wait(node: GNode) -> str:
    """"waits for SIGUSR1 (signal.sigwait)" when the node's job line waits for a signal
    (signal.sigwait/sigwaitinfo/sigtimedwait/pause); "" otherwise. Only the call's name and the
    signal names are taken from the line (never its text)."""
    for frame in (node.user_frame, node.frame):
        code = frame.code if frame is not None and frame.code else ""
        found = _SIGNAL_CALL.search(code)
        if found:
            sigs = sorted(set(_SIGNAL_NAME.findall(code)))[:3]
            return f"waits for {' or '.join(sigs) if sigs else 'a signal'} (signal.{found.group(1)})"
    return ""


def _unfollowed_end(job_id: str | None, top: RootCause, names: str) -> str:
    """A chain that ends in a wait the graph could not follow (a symptom: ray.get on an object no
    task row produces, an event or queue with no known setter) names the last process seen
    waiting, not what it waits for: a victim as likely as a culprit. Inconclusive, with it named
    as where to look ("" when the chain ends in a root cause or a cycle)."""
    own = catalog().get(top.pattern)
    if top.cycle or (own is not None and own.kind == "root-cause"):
        return ""
    what = own.title[:1].lower() + own.title[1:] if own is not None else "a wait no pattern recognises"
    signal = _signal_wait(top.culprits[0]) if top.culprits else ""
    if signal:
        return (f"Job {job_id} may be hung, but the chain of waits ends in {names}, which {signal}: who would send "
                "it is not visible (any process of the user, a timer — setitimer/alarm — or an operator may; no "
                "/proc reading names a sender). Find the code that should signal this pid, or diagnose again later.")
    release = top.culprits[0].release if top.culprits else ""
    if release:
        # Its waker is known and scheduled: a timer, not a missing setter (inconclusive, never a hang).
        return (f"Job {job_id} may be hung, but the chain of waits ends in {names}, {what}, and its wait is a "
                f"scheduled release, {release}. A wait that ends by itself is no hang: diagnose again once it is due "
                "(a wait still there after that is worth a look).")
    return (f"Job {job_id} may be hung, but the chain of waits ends in {names}, {what}, and what it waits for "
            "could not be followed (an object no task row produces — a Serve request, another job's object, a "
            "row the State API has not shown yet — or an event or queue with no known setter): it may be a victim "
            "of something unseen. Read its stack in 05_stacks.txt, or diagnose again with --locals.")


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
        loop = diag.graph.loop_of(cause.culprits[0])
        children = loop is not None and loop.kind == "children"
        if children and loop is not None:
            reason = loop.last_error  # the exception its children's tracebacks end with, again and again
        if not reason or any(reason in e for e in cause.evidence if not children or e.startswith(DEATH_PREFIX)):
            continue
        cause.evidence.insert(0, f"{DEATH_PREFIX}{reason}")
        cause.summary += f" — dies of: {reason}"
        if diag.verdict == "hang" and cause is diag.causes[0]:
            diag.summary += f" Each attempt dies of: {reason}."


def _loop_activity(top: RootCause, graph: WaitGraph) -> bool:
    """True when the culprit's activity is its children's crash loop itself: a process that
    starts child after child, each printing the same traceback to the log they share and dying
    (CPU, reads and log lines of the loop, not of work that could end the wait)."""
    loop = graph.loop_of(top.culprits[0])
    return top.pattern == "crash-loop" and loop is not None and loop.kind == "children"


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
