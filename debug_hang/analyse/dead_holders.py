"""A retried task's poll for something held on behalf of its own dead attempt (pure).

A task retried after its worker died (WORKER_DIED: an OOM kill, a crash) whose retry runs, in
its own frames, a loop that sleeps and asks again (poll-never-satisfied) is past its restart:
what it waits for is read from its loop, not "being retried". What an application keeps for a
holder - a lease, a claim, a lock record in an actor or a table - stays held when the holder's
process dies, unless something (a TTL, a heartbeat) frees it. The holder is named only in the
job's own words: the poll's log line, repeated every round, names it by a token (an owner id) -
and when that exact token was printed by the dead attempt and by no live process, the poll waits
for a holder that is gone: a hang whose culprit is that dead attempt. Without that match the poll
is a candidate, inconclusive: a live party (or a TTL) may still release it. A poll whose loop
holds the claim's recorded expiry, still ahead, is never blamed on the dead holder: the expiry
frees it (analyse/expiry.py).

Logs are untrusted text: tokens are matched exactly, never interpreted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from debug_hang.analyse.crashloop import CrashLoop
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.expiry import PAST_GRACE_S, scheduled_release
from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph import GNode, WaitGraph
from debug_hang.analyse.progress import rules
from debug_hang.analyse.rootcause import RootCause, chains
from debug_hang.model import ProcessRef
from debug_hang.rows import TaskRow
from debug_hang.snapshot import DONE_STATES, DRIVER_TASK_PREFIX, POLLING_TASKS
from debug_hang.untrusted import code_span

MIN_ROUNDS = 3  # the same log line (its ids and numbers aside), this many times in a row, ending the log
RECENT_LINES = 40  # the last lines of the waiter's log read for its poll
HOLDER_CONFIDENCE = 0.9
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]*[A-Za-z0-9]")
_VARYING = re.compile(r"[A-Za-z0-9_.:\-]*\d[A-Za-z0-9_.:\-]*")  # ids and numbers: what differs between rounds
_SOURCE = re.compile(r"^\((?P<name>[^()]*?) pid=(?P<pid>\d+)(, ip=[^)]*)?\) ")
_RAY_LINE = re.compile(r"^(:(job_id|actor_name|task_name):|\(raylet|\(autoscaler|\(gcs)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def retried_poll(top: RootCause, graph: WaitGraph) -> CrashLoop | None:
    """The earlier deaths of the task whose live retry is the culprit polling (None: not that)."""
    culprit = top.culprits[0] if top.culprits else None
    if culprit is None or top.pattern != "poll-never-satisfied" or culprit.kind != "task" or not culprit.pid:
        return None
    loop = graph.loop_of(culprit)
    if loop is None or loop.kind != "task" or culprit.state in ("dead", "restarting") or not loop.failed_attempts:
        return None
    return loop


def retried_poll_text(job_id: str | None, top: RootCause, graph: WaitGraph) -> str | None:
    """The inconclusive verdict of a retry's poll whose holder is not named (None: not that)."""
    loop = retried_poll(top, graph)
    if loop is None:
        return None
    culprit = top.culprits[0]
    where = culprit.user_frame or culprit.frame
    line = f" at {where.function} line {where.line} {code_span(where.code or '', 120)}" if where else ""
    return (f"Job {job_id} may be hung: {culprit.label()} polls{line}, and it is the retry of a task whose earlier "
            f"attempt died ({loop.text()}). What it polls for may be held on behalf of that dead attempt (a lease, a "
            "claim, a lock record it took before its worker died), or by a live party that will release it, or "
            "freed by a TTL. A hang needs the holder named: its poll's log line naming a token only the dead "
            "attempt printed. Read the poll's condition and its log, or diagnose again in a minute.")


@dataclass
class _Lines:
    """What each party printed: the waiter's own lines, the dead attempts' lines, the others'."""

    waiter: list[str]
    dead: list[str]
    others: list[str]


def _clean(text: str) -> list[str]:
    return [_ANSI.sub("", ln).rstrip() for ln in text.splitlines() if ln.strip()]


def _split_driver_log(text: str, waiter: int, dead: set[int]) -> _Lines:
    """The driver log's lines by who printed them (Ray's `(name pid=N) ` prefix; none: the driver)."""
    out = _Lines([], [], [])
    for line in _clean(text):
        if _RAY_LINE.match(line):
            continue
        m = _SOURCE.match(line)
        pid = int(m["pid"]) if m else None
        body = line[m.end():] if m else line
        (out.waiter if pid == waiter else out.dead if pid in dead else out.others).append(body)
    return out


def _template(line: str) -> str:
    return _VARYING.sub("#", line)


def _poll_run(lines: list[str]) -> list[str]:
    """The trailing run of the same line (ids and numbers aside) that ends the waiter's log."""
    recent = lines[-RECENT_LINES:]
    if not recent:
        return []
    last = _template(recent[-1])
    run: list[str] = []
    for line in reversed(recent):
        if _template(line) != last:
            break
        run.append(line)
    return list(reversed(run)) if len(run) >= MIN_ROUNDS else []


def _tokens(line: str, exact: frozenset[str] = frozenset()) -> set[str]:
    """Identifier-like words: letters and digits both, 6 characters or more (an owner id, a uuid
    part, host-pid), or one of `exact` (the dead attempt's pid and worker id)."""
    found = set()
    for tok in _TOKEN.findall(line):
        if tok in exact or (len(tok) >= 6 and any(c.isdigit() for c in tok) and any(c.isalpha() for c in tok)):
            found.add(tok)
    return found


def _form(token: str) -> tuple[str, int, bool]:
    """A token's form: what precedes its last separator, the length of its last part, and
    whether that part is hexadecimal (`compact-89ca85d3` and `compact-efd74991` share one)."""
    head, _, tail = token.rpartition("-") if "-" in token else token.rpartition("_")
    return head, len(tail), bool(re.fullmatch(r"[0-9a-fA-F]+", tail))


def _dead_attempts(diag: Diagnosis, waiter: GNode) -> list[TaskRow]:
    deaths = set(rules().crash_loop.death_error_types)
    return [t for t in diag.rows.tasks if t.task_id == waiter.task_id and t.state == "FAILED"
            and t.error_type in deaths and t.worker_pid and t.worker_pid != waiter.pid]


def _others_alive(diag: Diagnosis, waiter: GNode) -> list[TaskRow]:
    """Unfinished calls of the job besides the waiter's own attempt and the calls it makes (its
    poll's rounds): a live party that may hold what it polls for and release it."""
    return [t for t in diag.rows.tasks
            if t.job_id == diag.job_id and t.state not in DONE_STATES and t.task_id != waiter.task_id
            and t.parent_task_id != waiter.task_id and t.name not in POLLING_TASKS
            and not t.task_id.startswith(DRIVER_TASK_PREFIX) and t.type != "DRIVER_TASK"]


def _waiter_lines(diag: Diagnosis, waiter: GNode, driver: _Lines) -> list[str]:
    ev = diag.evidence.per_node.get(waiter.key) if diag.evidence else None
    own = [ln for ln in _clean(ev.logs.get("out", "")) if not _RAY_LINE.match(ln)] if ev else []
    if len(_poll_run(own)) >= MIN_ROUNDS:
        return own
    if len(_poll_run(driver.waiter)) >= MIN_ROUNDS:
        return driver.waiter
    info = diag.collection.info.get(ProcessRef(waiter.node_id, waiter.pid), {})
    logs = (info.get("progress") or {}).get("logs") or []
    tail = [str(ln) for log in logs if isinstance(log, dict) and log.get("fd") == 1 for ln in log.get("tail") or []]
    return [ln for ln in tail if not _RAY_LINE.match(ln)]


def name_dead_holder(diag: Diagnosis) -> None:
    """Once the logs are read: a retry's poll whose repeated line names a token that only its dead
    attempt printed waits for a holder that is gone - a hang, that dead attempt the culprit."""
    if diag.evidence is None or not diag.causes or diag.verdict == "no-hang":
        return
    top = diag.causes[0]
    if retried_poll(top, diag.graph) is None:
        return
    waiter = top.culprits[0]
    if scheduled_release(diag.busy, waiter.ref) is not None:
        return  # what it polls for expires by itself at a time its loop holds (analyse/expiry.py)
    dead = _dead_attempts(diag, waiter)
    if not dead or _others_alive(diag, waiter) or not waiter.pid:
        return
    driver = _split_driver_log(diag.evidence.driver_log, waiter.pid, {int(t.worker_pid or 0) for t in dead})
    run = _poll_run(_waiter_lines(diag, waiter, driver))
    if not run:
        return
    ev = diag.evidence.per_node.get(waiter.key)
    dead_lines = driver.dead + [ln for name, text in (ev.logs.items() if ev else []) if name.startswith("dead-")
                                for ln in _clean(text) if not _RAY_LINE.match(ln)]
    exact = frozenset(str(x) for t in dead for x in (t.worker_pid, t.worker_id) if x)
    named = set.intersection(*(_tokens(ln, exact) for ln in run))
    poll = _template(run[-1])
    printed = {tok for ln in dead_lines if _template(ln) != poll for tok in _tokens(ln, exact)} | (named & exact)
    others = {tok for ln in driver.others for tok in _tokens(ln)}
    tokens = sorted((named & printed) - others)
    if not tokens:
        return
    # A token of the same form as one only the waiter printed (each attempt's own owner id) is the
    # holder's identity: quoted alone when there is one (a shared argument, a table name, is not).
    own = {_form(t) for t in named - printed}
    tokens = [t for t in tokens if _form(t) in own] or tokens
    holder = max(dead, key=lambda t: (t.end_time_ms or 0.0, t.attempt_number))
    expiry = next((w.expiry for w in diag.busy if w.ref == waiter.ref and w.expiry is not None), None)
    why = "" if expiry is None else "" if expiry.renewed else f": more than {PAST_GRACE_S:.0f} s before the sample"
    expired = ([f"{waiter.label()}'s loop holds {expiry.text()}{why}, and its poll still fails - that expiry does "
                "not free what it polls for"] if expiry is not None else [])
    _blame(diag, top, waiter, holder, tokens, run, expired)


def _blame(diag: Diagnosis, top: RootCause, waiter: GNode, holder: TaskRow, tokens: list[str], run: list[str],
           expired: list[str]) -> None:
    key = f"task:{holder.task_id}:attempt-{holder.attempt_number}"
    if key in diag.graph.nodes:
        return  # already named (the evidence read again)
    said = ", ".join(code_span(t, 80) for t in tokens[:3])
    node = GNode(key=key, kind="task", name=f"{holder.name} attempt {holder.attempt_number}", state="dead",
                 pid=holder.worker_pid, node_id=holder.node_id, task_id=holder.task_id, task_name=holder.name,
                 class_name=holder.func_or_class_name or holder.name, pattern="poll-never-satisfied")
    node.evidence.append(f"FAILED ({holder.error_type}): its worker died; it printed {said} before it died, the "
                         "token its retry's poll now names as what it waits for")
    diag.graph.nodes[key] = node
    choose(node, "lease_held_by_dead_owner")
    diag.graph.add_edge(waiter.key, key, "poll-never-satisfied",
                        f"polls for what {node.label()} holds: each of its last {len(run)} log lines names {said}, "
                        "which that dead attempt printed and no live process did")
    evidence = [f"{waiter.label()} repeats {code_span(run[-1], 200)} ({len(run)} times in a row, ending its log): "
                f"it names {said}, printed by {node.label()} (FAILED, {holder.error_type}) and by no live process",
                f"{waiter.label()} runs a later attempt of the same task: its poll waits for something held on "
                "behalf of its own dead attempt "
                "(a lease, a claim, a lock record kept in another process's state), which nothing alive releases: "
                "no other call of the job is running or queued"] + expired + top.evidence
    diag.causes[0] = RootCause(
        pattern="poll-never-satisfied", culprits=[node], victims=[waiter.key] + [v for v in top.victims if v != waiter.key],
        confidence=min(top.confidence, HOLDER_CONFIDENCE) if top.confidence else HOLDER_CONFIDENCE, evidence=evidence,
        summary=f"{node.label()} died holding what {waiter.label()} polls for")
    diag.chains = chains(diag.graph, diag.causes)
    diag.verdict = "hang"
    diag.summary = (f"Job {diag.job_id} is hung: {waiter.label()} polls for something held on behalf of "
                    f"{node.label()}, which died ({holder.error_type}) - its poll's log line names {said}, printed by "
                    f"that dead attempt and by no live process; nothing alive releases it. Culprit {node.label()} (the holder "
                    f"that died); {len(diag.causes[0].victims)} process(es) wait on it.")
