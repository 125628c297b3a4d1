"""The proof of each root cause: what an engineer checks before believing it, in one place.

For every cause the Diagnosis holds a `Proof` built from what the analysis already read: the
culprit's code at the deciding line with the lines around it (or, for a culprit whose call failed,
the line that raised and the line its waiters are at), the failed call's exception and traceback
from the culprit's own log or the driver log, the counts that show the stall (calls by state, the
last line each process printed and how long before the window), what was compared between the
samples and found unchanged, and the one observation that would prove the finding wrong (the
catalog's `disproved_by`). Renderers (report.md, diagnosis.json, report.html) only show it.
Pure: it reruns on a saved folder.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from debug_hang.analyse.crashloop import DEATH_PREFIX, DEATH_SOURCE, death_reason
from debug_hang.analyse.fixes import cause_fix
from debug_hang.analyse.graph import GNode
from debug_hang.analyse.next_steps import FinishedCall, finished_call
from debug_hang.analyse.patterns import catalog, is_library
from debug_hang.analyse.progress import rules
from debug_hang.analyse.rootcause import Chain, RootCause
from debug_hang.model import Frame, Process, ProcessRef, short_path
from debug_hang.snapshot import POLLING_TASKS

if TYPE_CHECKING:
    from debug_hang.analyse.diagnosis import Diagnosis

MAX_PROOFS = 5  # causes given a proof (the report shows as many)
MAX_TRACEBACK = 40  # lines of one traceback kept
MAX_CALL_NAMES = 8  # call names counted per proof
MAX_LAST_LINES = 4  # processes whose last printed line is quoted
_PREFIX = re.compile(r"^\((?P<name>[^()]*?) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\) ")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_START = re.compile(r"Traceback \(most recent call last\):|Unhandled error|^Exception in thread\b")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Fault|Full|Empty|Timeout)\b.*")
_FRAME_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+),? in (?P<function>.+)$')  # traceback, faulthandler
_RAY_MARKERS = re.compile(r"^:(job_id|actor_name|task_name):")
ASYNCIO_TASK_DIED = "Task exception was never retrieved"  # asyncio's default exception handler
_FALLBACK_DISPROOF = ("any process on the chain working in a longer window (--samples 5 --interval 3): a changed stack, "
                      "a new log line or a finished call means it is slow, not stuck")


@dataclass
class CodeAt:
    """A line of the job's code that decides the finding, with the lines around it when read."""

    role: str  # "culprit" (where it waits or spins), "raised" (the failed call), "waiting" (its waiters)
    who: str
    function: str
    file: str
    line: int | None
    code: str | None = None
    context: list[str] = field(default_factory=list)  # "N: text", read on the process's node

    @property
    def where(self) -> str:
        return f"{short_path(self.file)}:{self.line}" if self.line else short_path(self.file)


@dataclass
class Failure:
    """The exception of the culprit's failed call (or of the thread or process that died)."""

    who: str
    call: str | None  # the failed task's name, when a task failed
    source: str  # "worker log", "driver log" or "State API"
    exception: str  # its last line: `AttributeError: 'NoneType' object has no attribute 'lower'`
    traceback: list[str] = field(default_factory=list)


@dataclass
class CallCount:
    """Calls of one name in the job's task rows, by state: submitted vs finished."""

    name: str
    states: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.states.values())

    def text(self) -> str:
        parts = ", ".join(f"{n:,} {s}" for s, n in sorted(self.states.items(), key=lambda kv: -kv[1]))
        return f"{self.name}: {self.total:,} call(s) — {parts}"


@dataclass
class LastSign:
    """The last sign of work from one process: the last line it printed (and how long before the
    window), or the job's last finished call."""

    who: str
    text: str
    seconds_before: float | None
    source: str  # "log" or "tasks"


@dataclass
class Proof:
    """What an engineer checks before believing one root cause."""

    pattern: str
    culprit: str
    mechanism: str  # one sentence, this job's words: who waits on what, and why it never comes
    fix: str
    deciding: CodeAt | None = None  # the one line to read
    code: list[CodeAt] = field(default_factory=list)
    failure: Failure | None = None
    calls: list[CallCount] = field(default_factory=list)
    last_signs: list[LastSign] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # what was compared between samples, unchanged
    disproved_by: str = ""

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["calls"] = [{"name": c.name, "states": c.states, "total": c.total} for c in self.calls]
        return doc


# ---------------------------------------------------------------- tracebacks

def _clean(line: str) -> str:
    return _ANSI.sub("", line).rstrip()


def _own_lines(text: str, pid: int | None) -> list[str]:
    """A log's lines, Ray's `(Name pid=N) ` prefixes dropped; with `pid`, lines prefixed with
    another process are left out (a driver log carries every worker's forwarded output)."""
    out = []
    for raw in text.splitlines():
        line = _clean(raw)
        prefix = _PREFIX.match(line)
        if prefix:
            if pid is not None and int(prefix["pid"]) != pid:
                continue
            line = line[prefix.end():]
        if not _RAY_MARKERS.match(line):
            out.append(line)
    return out


def tracebacks(text: str, pid: int | None = None) -> list[list[str]]:
    """The tracebacks in a log, each from its first line (`Traceback ...`, Ray's `Unhandled
    error ...`, `Exception in thread ...`) to its exception line, bounded. With `pid`, Ray's
    `Unhandled error` reports of other processes are skipped."""
    lines = _own_lines(text, pid)
    blocks: list[list[str]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not _START.search(line) or (pid is not None and "Unhandled error" in line and f"pid={pid}," not in line):
            i += 1
            continue
        at = i
        block, i = _block(lines, i)
        if block:
            # asyncio's report of a Task that raised, logged when the Task is garbage-collected:
            # "Task exception was never retrieved", "future: <Task finished ...>", then the traceback
            head = lines[max(0, at - 2):at]
            if len(head) == 2 and head[0].startswith(ASYNCIO_TASK_DIED) and head[1].startswith("future: <Task"):
                block = head + block
            blocks.append(block)
    return blocks


def _block(lines: list[str], start: int) -> tuple[list[str], int]:
    """One traceback from `start`: frame lines and chained tracebacks, up to the exception line."""
    block = [lines[start]]
    seen_frame = False
    i = start + 1
    while i < len(lines) and len(block) < 400:
        line = lines[i]
        i += 1
        if _FRAME_LINE.match(line) or line.startswith((" ", "\t")) or not line.strip():
            seen_frame = seen_frame or bool(_FRAME_LINE.match(line))
            block.append(line)
            continue
        if line.startswith(("During handling", "The above exception", "Traceback (most recent")) or line.startswith("ray::"):
            block.append(line)
            continue
        if _EXCEPTION.match(line) or seen_frame:
            block.append(line)
            if i < len(lines) and lines[i].startswith(("During handling", "The above exception")):
                continue
            break
        break
    if not seen_frame:
        return [], i
    if len(block) > MAX_TRACEBACK:
        block = block[:4] + [f"... {len(block) - MAX_TRACEBACK + 4} lines left out ..."] + block[-(MAX_TRACEBACK - 5):]
    return block, i


def exception_line(block: list[str]) -> str:
    """The traceback's last exception line (`Type: message`)."""
    for line in reversed(block):
        if _EXCEPTION.match(line.strip()):
            return line.strip()
    return block[-1].strip() if block else ""


def raising_frame(block: list[str]) -> CodeAt | None:
    """The innermost frame of the job's own code in a traceback: the line that raised."""
    found: CodeAt | None = None
    for i, line in enumerate(block):
        m = _FRAME_LINE.match(line)
        if m is None:
            continue
        frame = Frame(function=m["function"].strip(), file=m["file"], line=int(m["line"]))
        if is_library(frame):
            continue
        code = block[i + 1].strip() if i + 1 < len(block) and not _FRAME_LINE.match(block[i + 1]) else None
        found = CodeAt("raised", "", frame.function, frame.file, frame.line, code)
    return found


def _failure(diag: Diagnosis, culprit: GNode, done: FinishedCall | None) -> Failure | None:
    """The exception of the culprit's failed call, of its dead process or of its thread that died:
    its own .err log first, then the driver log (Ray's report of an exception nobody fetched),
    then the State API's row (cut at ~500 characters); for a process that died without a
    traceback, the death reason its log gives."""
    failed = done is not None and done.state == "FAILED"
    dead = culprit.state in ("dead", "restarting") or culprit.pattern in ("crash-loop", "peer-rank-dead")
    method = done.task.rsplit(".", 1)[-1] if done is not None else None
    own = diag.evidence.per_node.get(culprit.key) if diag.evidence is not None else None
    err_logs = [text for name, text in (own.logs.items() if own is not None else []) if name.endswith("err")]
    for text in err_logs:
        blocks = tracebacks(text)
        if not (failed or dead):
            # a thread that died, or an asyncio Task (a coroutine of an async actor)
            blocks = [b for b in blocks if b[0].startswith(("Exception in thread", ASYNCIO_TASK_DIED))]
        if blocks:
            return _from_block(culprit, done, "worker log", _pick(blocks, method))
    if (failed or dead) and diag.evidence is not None and diag.evidence.driver_log and culprit.pid:
        blocks = tracebacks(diag.evidence.driver_log, culprit.pid)
        if blocks:
            return _from_block(culprit, done, "driver log", _pick(blocks, method))
    if failed and done is not None and done.task_id:
        row = next((t for t in diag.rows.tasks if t.task_id == done.task_id and t.state == "FAILED"), None)
        if row is not None and row.error_message:
            lines = [_clean(x) for x in row.error_message.strip().splitlines()][-MAX_TRACEBACK:]
            return Failure(culprit.label(), done.task, "State API", exception_line(lines) or str(row.error_type), lines)
    if dead and own is not None:
        return _death(culprit, done, own.highlights, err_logs)
    return None


def _death(culprit: GNode, done: FinishedCall | None, highlights: list[str], err_logs: list[str]) -> Failure | None:
    """A process that died without a traceback: the reason its log gives, with its last lines."""
    reason = next((h[len(DEATH_PREFIX):].split(DEATH_SOURCE)[0] for h in highlights if h.startswith(DEATH_PREFIX)), None)
    reason = reason or death_reason(err_logs + highlights)
    last = [h.split("] ", 1)[-1] for h in highlights if h.startswith("[err]")]
    reason = reason or (last[-1] if last else None)  # what it printed last, as an error, before it died
    if not reason:
        return None
    tail = [x for text in err_logs for x in _own_lines(text, None) if x.strip()][-8:]
    return Failure(culprit.label(), done.task if done is not None else None, "worker log", reason, tail)


def _pick(blocks: list[list[str]], method: str | None) -> list[str]:
    """The last traceback, or the last one that names the failed call's method."""
    named = [b for b in blocks if method and any(f"in {method}" in ln or f".{method}(" in ln for ln in b)]
    return (named or blocks)[-1]


def _from_block(culprit: GNode, done: FinishedCall | None, source: str, block: list[str]) -> Failure:
    return Failure(culprit.label(), done.task if done is not None else None, source, exception_line(block), block)


# ---------------------------------------------------------------- code at the line

def _frame_code(role: str, node: GNode, frame: Frame | None) -> CodeAt | None:
    if frame is None or not frame.line:
        return None
    return CodeAt(role, node.label(), frame.function, frame.file, frame.line, frame.code, list(frame.context or []))


def _other_threads(diag: Diagnosis, node: GNode, most: int = 2) -> list[CodeAt]:
    """The culprit's other threads that wait or run in the job's code (the thread holding the lock
    the deciding one waits for, in a lock-order deadlock): where each is."""
    cat = catalog()
    out: list[CodeAt] = []
    for v in diag.verdicts:
        if v.process.ref != node.ref:
            continue
        main = v.main.user_frame if v.main is not None else None
        for thread, match in v.threads:
            if match is v.main or match.user_frame is None or (match.pattern in cat and cat[match.pattern].kind == "benign"):
                continue
            if main is not None and (match.user_frame.file, match.user_frame.line) == (main.file, main.line):
                continue  # a peer of the main thread's wait (another slot at the same put): nothing new
            found = _frame_code("culprit", node, match.user_frame)
            if found is not None:
                found.who += f", thread {thread.name or thread.os_thread_id or thread.thread_id}"
                out.append(found)
    return out[:most]


def _victim_code(diag: Diagnosis, chain: Chain) -> CodeAt | None:
    """Where the culprit's nearest waiter is in the job's code (the line that waits on it)."""
    if len(chain) < 2:
        return None
    node = chain[-2][0]
    return _frame_code("waiting", node, node.user_frame or node.frame)


def _code(diag: Diagnosis, cause: RootCause, chain: Chain, failure: Failure | None) -> list[CodeAt]:
    """The lines that decide: the culprits' own (for a cycle, every member's), the line that
    raised, and the line the waiters are at."""
    out: list[CodeAt] = []
    members = cause.culprits[:4] if cause.cycle else cause.culprits[:1]
    for node in members:
        if node.state in ("blocked", "busy") or (node.state == "idle" and node.user_frame is not None):
            found = _frame_code("culprit", node, node.user_frame or node.frame)
            if found is not None:
                out.append(found)
        for other in _other_threads(diag, node):
            if all((c.file, c.line) != (other.file, other.line) for c in out):
                out.append(other)
    if failure is not None:
        raised = raising_frame(failure.traceback)
        if raised is not None:
            raised.who = failure.who
            out.append(raised)
    if not cause.cycle:
        waiting = _victim_code(diag, chain)
        if waiting is not None and all((c.file, c.line) != (waiting.file, waiting.line) for c in out):
            out.append(waiting)
    return out


# ---------------------------------------------------------------- counts

def _calls(diag: Diagnosis, cause: RootCause, chain: Chain) -> list[CallCount]:
    """The job's calls of the classes and tasks on the chain, by state (e.g. 1,998 RUNNING,
    2 FINISHED), and the calls made on the queue or other actors the chain's processes use."""
    nodes = [n for n, _ in chain] + cause.culprits + [diag.graph.nodes[k] for k in cause.victims if k in diag.graph.nodes]
    classes = {n.class_name for n in nodes if n.class_name}
    names = {n.task_name for n in nodes if n.task_name}
    counts: dict[str, Counter[str]] = {}
    for task in diag.rows.tasks:
        if task.type == "ACTOR_CREATION_TASK" or task.name in POLLING_TASKS:
            continue
        if diag.job_id and diag.job_id not in (task.job_id, (task.parent_task_id or "")[-8:]):
            continue  # another job's call (an actor class of the same name in an earlier run)
        owner = task.name.split(".", 1)[0] if task.actor_id else None
        if (owner is not None and owner in classes) or task.name in names:
            counts.setdefault(task.name, Counter())[task.state] += 1
    ranked = sorted(counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:MAX_CALL_NAMES]
    return [CallCount(name, dict(states)) for name, states in ranked]


def _log_tail(info: dict[str, Any]) -> tuple[str, float | None] | None:
    """The last line a process printed up to the window's end, and how long before the window
    it was printed (0 when printed in it; None when unknown), from its freshest log."""
    ignore = rules().logs.ignore
    found: list[tuple[float, str, float | None]] = []
    for log in (info.get("progress") or {}).get("logs") or []:
        new = [_clean(x) for x in log.get("new") or []]
        lines = [x for x in (new or [_clean(x) for x in log.get("tail") or []])
                 if x.strip() and not _RAY_MARKERS.match(x) and not any(p.search(x) for p in ignore)]
        if not lines:
            continue
        age = 0.0 if new else log.get("age_s")
        found.append((float("inf") if age is None else float(age), lines[-1][:200], None if age is None else float(age)))
    if not found:
        return None
    _, line, age = min(found, key=lambda f: f[0])
    return line, age


def _last_signs(diag: Diagnosis, cause: RootCause, chain: Chain) -> list[LastSign]:
    """The last line each culprit (then each process of the chain) printed, with its age; then the
    job's last finished call and how long before the first reading it ended."""
    out: list[LastSign] = []
    seen: set[ProcessRef] = set()
    for node in cause.culprits[:2] + [n for n, _ in reversed(chain)]:
        if len(out) >= MAX_LAST_LINES or node.ref in seen or not node.pid:
            continue
        seen.add(node.ref)
        tail = _log_tail(diag.collection.info.get(node.ref, {}))
        if tail is not None:
            out.append(LastSign(node.label(), tail[0], tail[1], "log"))
    done = [t for t in diag.rows.tasks if t.state in ("FINISHED", "FAILED") and t.end_time_ms
            and t.type != "ACTOR_CREATION_TASK" and t.name not in POLLING_TASKS]
    if done and diag.snapshot is not None:
        last = max(done, key=lambda t: t.end_time_ms or 0)
        age = diag.snapshot.taken_at - (last.end_time_ms or 0) / 1000.0
        out.append(LastSign("job", f"last call to end: {last.name} {last.state}", round(max(age, 0.0), 1), "tasks"))
    return out


# ---------------------------------------------------------------- unchanged between samples

def _signature(proc: Process) -> tuple[Any, ...]:
    return tuple(sorted(tuple((f.function, f.line) for f in t.frames if not f.native) for t in proc.threads))


def _unchanged(diag: Diagnosis, cause: RootCause, chain: Chain) -> list[str]:
    """What was compared between the samples and found unchanged, over the cause's processes."""
    keys = {n.ref for n in cause.culprits} | {n.ref for n, _ in chain}
    keys |= {diag.graph.nodes[k].ref for k in cause.victims if k in diag.graph.nodes}
    samples: dict[ProcessRef, list[Process]] = {}
    for proc in diag.collection.processes:
        if proc.ref in keys:
            samples.setdefault(proc.ref, []).append(proc)
    twice = {ref: procs for ref, procs in samples.items() if len(procs) > 1}
    out: list[str] = []
    if twice:
        same = sum(1 for procs in twice.values() if len({_signature(p) for p in procs}) == 1)
        most = max(len(p) for p in twice.values())
        out.append(f"stacks: {same:,} of {len(twice):,} process(es) dumped {most} times show the same stack in every sample")
    culprit_refs = {c.ref for c in cause.culprits}
    for sig in diag.signals:
        if ProcessRef(sig.node_id, sig.pid) not in culprit_refs or not sig.read:
            continue
        moved = [f.text for f in sig.findings if f.strength != "info"]
        r = sig.readings
        text = (f"{sig.name} over {sig.window_s or 0:.1f}s: wrote {r.get('wchar_beyond_logs', 0):.0f} B beyond its logs, "
                f"printed {r.get('log_lines', 0):.0f} log line(s), CPU {r.get('cpu_percent', 0):.0f}%")
        text += f"; unchanged: {', '.join(sig.silent)}" if sig.silent else ""
        text += f"; moved: {'; '.join(moved)[:200]}" if moved else ""
        out.append(text)
    if diag.tasks_compared:
        out.append("task table: read twice, at the first sample and after the last one: "
                   + ("no call of the job finished in between" if not diag.progress else "; ".join(diag.progress[:3])))
    return out


# ---------------------------------------------------------------- the one sentence

def _state_fact(diag: Diagnosis, culprit: GNode, done: FinishedCall | None, failure: Failure | None) -> str:
    """What the culprit is doing instead of releasing its waiters."""
    if done is not None:
        head = done.describe().split("; ", 1)[0]
        return head if failure is None or done.state != "FAILED" else f"its last call {done.task} FAILED ({failure.exception[:160]})"
    if failure is not None:
        return f"it {'died' if culprit.state in ('dead', 'restarting') else 'raised'}: {failure.exception[:160]}"
    frame = culprit.user_frame or culprit.frame
    where = f" at {frame.function} ({frame.short_file}:{frame.line})" if frame is not None and frame.line else ""
    pattern = catalog().get(culprit.pattern or "")
    what = f" — {pattern.title[0].lower()}{pattern.title[1:]}" if pattern is not None else ""
    cpu = diag.collection.info.get(culprit.ref, {}).get("cpu_percent")
    by_state = {"busy": f"it runs{where}" + (f" at {cpu:.0f}% CPU" if cpu is not None else "") + what,
                "blocked": f"it is blocked{where}{what}", "idle": f"it runs nothing{what}", "dead": f"it is dead{what}",
                "pending": f"it cannot be placed{what}", "restarting": f"it restarts{what}",
                "infeasible": "no node can hold it",
                # a starved request decided by a rule of its own (a pin to a full bundle) says that rule
                "starved": (f"it cannot be placed{what}" if culprit.pattern not in (None, "resource-starvation")
                            else "it waits for resources its waiters hold"),
                "unknown": "its stack was not read"}
    return by_state.get(culprit.state, f"it is {culprit.state}")


def _cycle_steps(diag: Diagnosis, cycle: list[str]) -> list[str]:
    """Each member's wait on the next one, in the cycle's order: what closes it (a file lock, a
    full pipe, a queued call), not the wait of a victim outside it."""
    steps = []
    for i, key in enumerate(cycle[:MAX_CYCLE_STEPS]):
        nxt = cycle[(i + 1) % len(cycle)]
        edge = next((e for e in diag.graph.edges if e.src == key and e.dst == nxt), None)
        if edge is not None and edge.evidence:
            node = diag.graph.nodes[key]
            who = f"pid {node.pid}" if node.kind == "process" and node.pid else node.label()  # named above
            steps.append(f"{who} {edge.evidence[:160]}")
    return steps


MAX_CYCLE_STEPS = 3  # the members' waits quoted in a cycle's mechanism


def _mechanism(diag: Diagnosis, cause: RootCause, chain: Chain, done: FinishedCall | None, failure: Failure | None) -> str:
    culprit = cause.culprits[0]
    if cause.cycle:
        steps = _cycle_steps(diag, cause.cycle)
        return f"{cause.summary}" + (f" ({'; '.join(steps)})" if steps else "")
    fact = _state_fact(diag, culprit, done, failure)
    if len(chain) >= 2 and chain[-2][1]:
        victim, why = chain[-2]
        more = len(cause.victims) - 1
        others = f" (and {more:,} more wait on it)" if more > 0 else ""
        return f"{victim.label()} {why} → {culprit.label()}{others}; {fact}."
    pattern = catalog().get(cause.pattern)
    first = pattern.meaning.split(". ", 1)[0].rstrip(".") + "." if pattern else cause.summary
    return f"{culprit.label()}: {fact}. {first}"


# ---------------------------------------------------------------- all of it

def prove(diag: Diagnosis) -> list[Proof]:
    """One proof per reported cause (at most MAX_PROOFS), in the causes' order."""
    out: list[Proof] = []
    for cause, chain in list(zip(diag.causes, diag.chains, strict=False))[:MAX_PROOFS]:
        culprit = cause.culprits[0]
        done = finished_call(diag, cause)
        failure = _failure(diag, culprit, done)
        code = _code(diag, cause, chain, failure)
        pattern = catalog().get(cause.pattern)
        deciding = next((c for c in code if c.role == "raised"), None) or next(iter(code), None)
        out.append(Proof(
            pattern=cause.pattern, culprit=", ".join(c.label() for c in cause.culprits[:3])
            + (f" and {len(cause.culprits) - 3:,} more" if len(cause.culprits) > 3 else ""),
            mechanism=_mechanism(diag, cause, chain, done, failure), fix=cause_fix(cause),
            deciding=deciding, code=code, failure=failure, calls=_calls(diag, cause, chain),
            last_signs=_last_signs(diag, cause, chain), unchanged=_unchanged(diag, cause, chain),
            disproved_by=(pattern.disproved_by if pattern and pattern.disproved_by else _FALLBACK_DISPROOF)))
    return out
