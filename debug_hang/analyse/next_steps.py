"""What to open next: per root cause, the section of references/patterns.md for its pattern and
the closest recorded case; the last call of a culprit that is idle because it returned or failed;
where the job's own code is on the node; for an `inconclusive` verdict, the exact next command.

Data-driven: the pattern anchors come from the headings of references/patterns.md and the cases
from the `case:` line each generated page under references/cases/ carries, so new patterns and
cases are picked up without a code change. The choice of a case uses only the mechanism (the
pattern, the patterns and states along the chain, the culprit's kind and state), never names.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debug_hang.analyse.failures import failure_step
from debug_hang.analyse.graph import GNode
from debug_hang.analyse.rootcause import RootCause
from debug_hang.paths import bundle_root
from debug_hang.rows import TaskRow
from debug_hang.snapshot import POLLING_TASKS

if TYPE_CHECKING:
    from debug_hang.analyse.busy import BusyWork
    from debug_hang.analyse.diagnosis import Diagnosis

PATTERNS_DOC = "references/patterns.md"
CASES_DIR = "references/cases"
DIAGNOSE = "scripts/diagnose_ray_hang.sh"
NODE_RUNNER = "scripts/run_on_each_ray_node.py"
# The line a generated case page carries: <!-- case: {"pattern": ..., "chain": [...], ...} -->
CASE_LINE = re.compile(r"\bcase: (\{.*?\}) -->")
_PKG_DIR = re.compile(r"^(.*/runtime_resources/working_dir_files/_ray_pkg_([0-9a-f]+))/")
_URI_HASH = re.compile(r"_ray_pkg_([0-9a-f]+)")
_PTRACE = ("permission denied", "operation not permitted", "ptrace")
_NO_PYSPY = ("py-spy not found", "no such file or directory: 'py-spy'", "pyspy-missing", "py-spy missing")


@dataclass
class FinishedCall:
    """The last call of an idle culprit that others wait on: it returned (perhaps early, while its
    peers are still inside the same call) or failed; where the waiting processes are instead."""

    task: str
    state: str
    task_id: str | None
    peers_at: str | None  # file:line (function) where the processes waiting on it are, in the job's code
    code: str | None  # that source line
    file: str | None  # full path of that source file, on their node
    peers_inside: bool = False  # they are still inside the same call (a rank that returned early)
    error: str | None = None  # a FAILED call's error type and last line

    def describe(self) -> str:
        """One sentence: what the call did, and where to read instead of the culprit's idle stack."""
        if self.state == "FAILED":
            head = f"its last call {self.task} FAILED" + (f" ({self.error})" if self.error else "")
        elif self.peers_inside:
            head = f"returned early from {self.task} ({self.state})"
        else:
            head = f"its last call {self.task} returned ({self.state})"
        if not self.peers_at:
            return head
        where = "its peers are still in it at" if self.peers_inside else "the processes waiting on it are at"
        return f"{head}; {where} {self.peers_at}"


@dataclass
class CauseGuide:
    pattern_doc: str  # references/patterns.md#<anchor>
    case: str | None  # references/cases/<name>.md
    case_why: str
    finished_call: FinishedCall | None = None


@dataclass
class JobCode:
    entrypoint: str | None
    driver_pid: int | None
    driver_node_id: str | None
    driver_script: str | None  # the file of the driver's `<module>` frame
    working_dir_uri: str | None  # runtime_env.working_dir, e.g. gcs://_ray_pkg_<hash>.zip
    working_dir: str | None  # the unpacked copy on the node(s) below
    working_dir_nodes: list[str] = field(default_factory=list)


@dataclass
class Guide:
    causes: list[CauseGuide]
    job_code: JobCode | None
    next_command: str | None
    next_why: str | None
    references_root: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- anchors and cases

def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@lru_cache(maxsize=4)
def doc_anchors(path: Path) -> frozenset[str]:
    """Anchors of every heading of a Markdown file (empty when the file is missing)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return frozenset()
    heads = re.findall(r"^#{1,6} (.+?)\s*$", re.sub(r"```.*?```", "", text, flags=re.S), re.MULTILINE)
    return frozenset(slug(h) for h in heads)


def pattern_doc(pattern: str, root: Path | None = None) -> str:
    """`references/patterns.md#<pattern>` when that section exists, else the page itself."""
    anchors = doc_anchors((root or bundle_root()) / PATTERNS_DOC)
    return f"{PATTERNS_DOC}#{slug(pattern)}" if slug(pattern) in anchors else PATTERNS_DOC


@lru_cache(maxsize=4)
def case_index(root: Path) -> tuple[tuple[str, dict[str, Any]], ...]:
    """(name, features) of every generated case page, read from its `case:` line."""
    out = []
    for page in sorted((root / CASES_DIR).glob("*.md")):
        found = CASE_LINE.search(page.read_text(encoding="utf-8")[:4000])
        if found:
            try:
                out.append((page.stem, json.loads(found.group(1))))
            except ValueError:
                continue
    return tuple(out)


_TASK_STATE = re.compile(r"\b(RUNNING|SUBMITTED_TO_WORKER|PENDING_[A-Z_]+|FINISHED|FAILED)\b")


def waits_of(reasons: list[str | None]) -> list[str]:
    """The Ray task states the chain's waits name (a call RUNNING, queued, pending, ...)."""
    return sorted({s for why in reasons if why for s in _TASK_STATE.findall(why)})


def chain_features(chain: list[tuple[GNode, str | None]]) -> dict[str, Any]:
    """The mechanism of one chain: what each step waits in and on, and what the culprit is."""
    last = chain[-1][0] if chain else None
    return {
        "chain": [n.pattern or n.state for n, _ in chain],
        "waits": waits_of([why for _, why in chain]),
        "culprit_kind": last.kind if last else None,
        "culprit_state": last.state if last else None,
    }


def _jaccard(a: list[str], b: list[str]) -> float:
    return len(set(a) & set(b)) / max(1, len(set(a) | set(b)))


def closest_case(pattern: str, features: dict[str, Any], root: Path | None = None) -> tuple[str | None, str]:
    """The recorded case of the same pattern whose chain looks most like this one."""
    cases = [(n, f) for n, f in case_index(root or bundle_root()) if f.get("pattern") == pattern]
    if not cases:
        return None, f"no recorded case of {pattern} yet"

    def score(item: tuple[str, dict[str, Any]]) -> tuple[float, str]:
        _, f = item
        overlap = _jaccard(features.get("chain") or [], f.get("chain") or []) + 0.5 * _jaccard(
            features.get("waits") or [], f.get("waits") or [])
        same_end = (f.get("culprit_kind") == features.get("culprit_kind")) + (
            f.get("culprit_state") == features.get("culprit_state"))
        length = -abs(len(f.get("chain") or []) - len(features.get("chain") or [])) / 10
        return (overlap + 0.5 * same_end + length, item[0])

    best = max(cases, key=lambda item: (score(item)[0], [-ord(c) for c in item[0]]))
    why = (("same pattern" if len(cases) == 1 else f"same pattern, the closest chain of {len(cases)} recorded")
           + f": {' → '.join(best[1].get('chain') or [])}")
    return f"{CASES_DIR}/{best[0]}.md", why


# ---------------------------------------------------------------- finished calls

def _last_done_call(culprit: GNode, tasks: list[TaskRow]) -> TaskRow | None:
    done = [t for t in tasks if culprit.actor_id and t.actor_id == culprit.actor_id
            and t.done and t.type == "ACTOR_TASK" and t.name not in POLLING_TASKS]
    return max(done, key=lambda t: t.end_time_ms or 0) if done else None


def finished_call(diag: Diagnosis, cause: RootCause) -> FinishedCall | None:
    """For an idle culprit (its call returned) that others wait on: the call, and where its
    peers still are in the job's code - the place to read, not the culprit's idle stack."""
    culprit = cause.culprits[0]
    if culprit.state != "idle" or diag.snapshot is None:
        return None
    task = _last_done_call(culprit, diag.rows.tasks)
    if task is None:
        return None
    name = task.name
    method = name.rsplit(".", 1)[-1]
    peers = [diag.graph.nodes[e.src] for e in diag.graph.into(culprit.key)]
    peer_pids = {n.pid for n in peers if n.pid}
    peer_actors = {n.actor_id for n in peers if n.actor_id}
    # Peers still inside the same call: the same method RUNNING on them (a rank that returned
    # early while the others are in the collective), or its frame on their stacks.
    inside_task = any(t.name == name and t.state == "RUNNING" and t.actor_id in peer_actors for t in diag.rows.tasks)
    best, inside = None, None
    for v in diag.verdicts:
        if v.process.pid not in peer_pids or v.main is None:
            continue
        frames = [t.frames for t, m in v.threads if m is v.main] or [[]]
        inside = next((f for f in frames[0] if f.function.rsplit(".", 1)[-1] == method), None)
        best = inside or v.main.user_frame or best
        if inside:
            break
    error = None
    if task.state == "FAILED":
        lines = (task.error_message or "").strip().splitlines()
        error = f"{task.error_type}: {lines[-1][:160]}" if lines else str(task.error_type)
    return FinishedCall(
        task=name, state=task.state, task_id=task.task_id,
        peers_at=f"{best.short_file}:{best.line} ({best.function})" if best else None,
        code=best.code if best else None, file=best.file if best else None,
        peers_inside=bool(inside) or inside_task, error=error)


# ---------------------------------------------------------------- the job's code

def job_code(diag: Diagnosis) -> JobCode | None:
    """The driver's entrypoint and the job's working_dir copy on the nodes (from stack paths)."""
    job = diag.rows.job(diag.job_id) if diag.job_id else None
    if job is None and not diag.collection.processes:
        return None
    uri = job.working_dir_uri if job else None
    want = _URI_HASH.search(uri or "")
    dirs: dict[str, set[str]] = {}
    script = None
    # Distinct (file, node) pairs first: thousands of processes share a handful of files.
    seen = {(f.file, p.node_id or "?") for p in diag.collection.processes for t in p.threads for f in t.frames
            if f.file and "_ray_pkg_" in f.file}
    for path, node in seen:
        found = _PKG_DIR.match(path)
        if found and (want is None or found.group(2) == want.group(1)):
            dirs.setdefault(found.group(1), set()).add(node)
    for proc in diag.collection.processes:
        if proc.role == "driver" and script is None:
            script = next((f.file for t in proc.threads for f in t.frames if f.function == "<module>"
                           and not re.search(r"/(site|dist)-packages/", f.file or "")), None)
    where = max(dirs, key=lambda d: len(dirs[d])) if dirs else None
    return JobCode(
        entrypoint=job.entrypoint or None if job else None, driver_pid=job.driver_pid if job else None,
        driver_node_id=job.driver_node_id if job else None, driver_script=script, working_dir_uri=uri,
        working_dir=f"{where}/" if where else None, working_dir_nodes=sorted(dirs.get(where, set())) if where else [])


# ---------------------------------------------------------------- inconclusive

def next_command(diag: Diagnosis) -> tuple[str | None, str | None]:
    """The exact command to run next when the verdict is inconclusive (flags that exist)."""
    if diag.verdict != "inconclusive":
        return None, None
    addr = shlex.quote(diag.address) if diag.address else "ADDRESS"
    job = f" --job-id {shlex.quote(diag.job_id)}" if diag.job_id else ""
    errors = diag.collection.errors + diag.errors
    text = " ".join(f"{e.error} {e.kind or ''}" for e in errors).lower()
    if any(e.kind == "state-api-down" for e in errors):
        pids = ",".join(str(v.process.pid) for v in diag.verdicts if v.verdict in ("blocked", "busy") and v.process.pid)
        return (f"python3 {NODE_RUNNER} --address {addr} -n NODE --dump {pids or 'PID1,PID2'} --samples 2",
                "the State API did not answer: only this machine's Ray workers were dumped; dump each other node "
                f"(`python3 {NODE_RUNNER} --address {addr} --list` lists them), or rerun "
                f"`bash {DIAGNOSE} {addr}{job}` once the dashboard answers")
    step = failure_step(diag)  # a failure that hid processes: the step that fits its kind
    if step is not None:
        return step
    if any(k in text for k in _PTRACE):
        return (f"bash {DIAGNOSE} {addr}{job}",
                "py-spy was refused (ptrace): run as root, or add SYS_PTRACE on the node/pod named in "
                "'What could not be collected', then rerun")
    if any(k in text for k in _NO_PYSPY):
        return (f"bash {DIAGNOSE} {addr}{job}",
                "py-spy is missing on a node named in 'What could not be collected': pip install py-spy there, then rerun")
    if diag.causes and all(c.culprits[0].kind == "resource" and c.culprits[0].state == "pending" for c in diag.causes):
        # Only requests that free capacity can still satisfy: the scheduler has not placed them yet.
        return f"bash {DIAGNOSE} {addr}{job}", "the job was still starting: diagnose again in a few seconds"
    busy = _busy_culprit(diag)
    if busy is not None and busy.one_call:
        node = shlex.quote(busy.ref.node_id or "NODE")
        return (f"python3 {NODE_RUNNER} --address {addr} -n {node} --dump {busy.ref.pid} --native --samples 3 --interval 5",
                f"{busy.label} is busy under one Python line: native frames show where in C it is, and whether "
                "that moves over a longer window")
    if busy is not None:
        return (f"bash {DIAGNOSE} {addr}{job} --locals --samples 5 --interval 2",
                f"{busy.label} is busy: its loop's locals over a longer window show whether its state advances")
    return (f"bash {DIAGNOSE} {addr}{job} --samples 5 --interval 2",
            "more samples over a longer window tell a wait from a slow step and follow waits two samples missed")


def _busy_culprit(diag: Diagnosis) -> BusyWork | None:
    """The top culprit's busy thread, when the verdict waits on whether it advances."""
    if not diag.causes or diag.causes[0].culprits[0].state != "busy":
        return None
    ref = diag.causes[0].culprits[0].ref
    return next((w for w in diag.busy if w.ref == ref and w.state in ("no-spin", "undecided")), None)


# ---------------------------------------------------------------- all of it

def guide(diag: Diagnosis, root: Path | None = None) -> Guide:
    """Everything an agent should open or run next, for report.md, the summary and diagnosis.json."""
    base = root or bundle_root()
    per_cause = []
    all_chains = diag.chains
    for cause, chain in zip(diag.causes, all_chains, strict=False):
        case, why = closest_case(cause.pattern, chain_features(chain), base)
        per_cause.append(CauseGuide(pattern_doc=pattern_doc(cause.pattern, base), case=case, case_why=why,
                                    finished_call=finished_call(diag, cause)))
    command, reason = next_command(diag)
    return Guide(causes=per_cause, job_code=job_code(diag), next_command=command, next_why=reason,
                 references_root=str(base))
