"""What failed in the collection, and the one next step that fits each kind of failure.

Two of those failures are the tool's own, not the job's or the node's, and a report must say so
before anything else (`tool_problem`): Ray refused a driver from this side or its helper could not
run because this side's Ray or Python is not the cluster's (`version-mismatch`), and the node
helper raised or could not be rebuilt on the node (`helper-error`). Every other kind (py-spy
missing or refused, a dump that timed out, a helper that never started) gets its own command in
`next_step`: the command that can help with that failure, not a generic "take more samples".
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from debug_hang.model import CollectionError

if TYPE_CHECKING:
    from debug_hang.analyse.diagnosis import Diagnosis

DIAGNOSE = "scripts/diagnose_ray_hang.sh"
NODE_RUNNER = "scripts/run_on_each_ray_node.py"
ToolKind = Literal["version-mismatch", "helper-error"]
HELPER_ERROR: ToolKind = "helper-error"
VERSION_MISMATCH: ToolKind = "version-mismatch"
TOOL_KINDS: tuple[ToolKind, ...] = (VERSION_MISMATCH, HELPER_ERROR)
# Ray releases whose dashboard imports pkg_resources, which setuptools 81 removed.
_PKG_RESOURCES_RAY = ((2, 9),)


@dataclass
class ToolProblem:
    """A failure of debug-hang itself (or of its Ray/Python against the cluster's), said first."""

    kind: ToolKind
    headline: str  # the first sentence of the summary and of report.md
    fix: str  # what to do about it, with the commands
    tool: dict[str, str] = field(default_factory=dict)  # this side's ray, python, cloudpickle
    cluster: dict[str, str] = field(default_factory=dict)  # the cluster's ray, python (or error)
    sides: str = ""  # both sides' versions, in words
    errors: list[str] = field(default_factory=list)  # the helper failures it explains (the first few)
    hidden: int = 0  # processes in unfinished calls left without a stack by it

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def minor(version: str | None) -> tuple[int, ...] | None:
    """(major, minor) of a version string such as `2.9.3` or `3.11.7`; None when unreadable."""
    parts = (version or "").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def _versions(diag: Diagnosis) -> tuple[dict[str, str], dict[str, str]]:
    versions = diag.snapshot.versions if diag.snapshot is not None else {}
    return dict(versions.get("tool") or {}), dict(versions.get("cluster") or {})


def _side(v: dict[str, str]) -> str:
    if v.get("error") or not v.get("ray"):
        return "unknown versions" + (f" ({v['error']})" if v.get("error") else "")
    return f"Ray {v['ray']} / Python {v.get('python', '?')}"


def sides(tool: dict[str, str], cluster: dict[str, str], pickler: bool = False) -> str:
    """Both sides' versions in words; with `pickler`, the cloudpickle each side's Ray bundles."""
    same = bool(tool.get("ray")) and tool.get("ray") == cluster.get("ray") and tool.get("python") == cluster.get("python")
    text = f"{_side(tool)} on both sides" if same else f"this side runs {_side(tool)}, the cluster runs {_side(cluster)}"
    if pickler and tool.get("cloudpickle"):
        nodes = f"the copy bundled with Ray {cluster['ray']}" if cluster.get("ray") else "the one its Ray bundles"
        text += f" (ray.cloudpickle: {tool['cloudpickle']} here, {nodes} on the nodes)"
    return text


def install_beside(cluster: dict[str, str]) -> tuple[str, str]:
    """(venv path, command) installing the cluster's Ray (and the tool's needs) in a venv of the
    cluster's Python minor, beside the tool."""
    ray_version = cluster.get("ray") or "RAY_VERSION"
    py = minor(cluster.get("python"))
    python = f"python{py[0]}.{py[1]}" if py else "python3"
    venv = f"/tmp/debug-hang-ray-{ray_version}"
    extra = " 'setuptools<81'" if minor(ray_version) in _PKG_RESOURCES_RAY else ""
    return venv, (f"{python} -m venv {venv} && {venv}/bin/pip install -q 'ray[default]=={ray_version}' "
                  f"py-spy pyyaml{extra}")


def _where(diag: Diagnosis) -> tuple[str, str]:
    addr = shlex.quote(diag.address) if diag.address else "ADDRESS"
    job = f" --job-id {shlex.quote(diag.job_id)}" if diag.job_id else ""
    return addr, job


def tool_problem(diag: Diagnosis) -> ToolProblem | None:
    """The tool's own failure, when there is one: a version mismatch (Ray major.minor differs, or
    a helper failed while any version differs) or a helper that failed for a reason of its own."""
    tool, cluster = _versions(diag)
    errors = [e for e in diag.collection.errors + diag.errors if e.kind in TOOL_KINDS]
    known = bool(tool.get("ray")) and bool(cluster.get("ray"))
    differs = known and (tool.get("ray") != cluster.get("ray") or tool.get("python") != cluster.get("python"))
    minor_differs = known and minor(tool.get("ray")) != minor(cluster.get("ray"))
    if not errors and not minor_differs:
        return None
    refused = any(e.kind == VERSION_MISMATCH for e in errors)
    kind: ToolKind = VERSION_MISMATCH if minor_differs or refused or (errors and differs) else HELPER_ERROR
    hidden = sum(1 for b in diag.uninspected if b.get("kind") in TOOL_KINDS)
    shown = [_short(e) for e in errors[:3]]
    nodes = len({e.node_id for e in errors})
    lost = f"; {hidden} process(es) in unfinished calls have no stack for that reason." if hidden else "."
    if kind == VERSION_MISMATCH:
        both = sides(tool, cluster)
        if refused:
            headline = (f"Version problem, not a finding about the job: {both}, and Ray refused to connect a driver "
                        f"from this side, so debug-hang's node helper could not run on {nodes} node(s){lost}")
        elif errors:
            headline = (f"Version problem, not a finding about the job: {both}, and debug-hang's node helper failed on "
                        f"{nodes} node(s) (`{shown[0]}`){lost}")
        else:
            headline = (f"Version warning: {both}. Every node was read directly from this machine (no helper task was "
                        "needed), so this diagnosis stands; a node elsewhere would need one, which Ray refuses or may "
                        "not rebuild across versions.")
        fix = _version_fix(diag, cluster)
    else:
        both = sides(tool, cluster, pickler=True)
        headline = (f"Tool problem, not a finding about the job: debug-hang's node helper failed on {nodes} node(s) "
                    f"(`{shown[0]}`), {both}{lost}")
        fix = _helper_fix(diag)
    return ToolProblem(kind=kind, headline=headline, fix=fix, tool=tool, cluster=cluster, sides=both, errors=shown,
                       hidden=hidden)


def _short(err: CollectionError) -> str:
    text = " ".join(str(err.error).split())
    return text[:200] + ("…" if len(text) > 200 else "")


# Read by recent Ray's version check on the connecting side: "minor" accepts a Python of another
# patch release (the same minor release runs the same bytecode, so shipped code rebuilds alike).
MATCH_MINOR = "RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor"


def python_patch_only(tool: dict[str, str], cluster: dict[str, str]) -> bool:
    """Same Ray and Python minor on both sides, another Python patch release: Ray still refuses."""
    return (bool(tool.get("ray")) and tool.get("ray") == cluster.get("ray") and tool.get("python") != cluster.get("python")
            and minor(tool.get("python")) is not None and minor(tool.get("python")) == minor(cluster.get("python")))


def _version_fix(diag: Diagnosis, cluster: dict[str, str]) -> str:
    addr, job = _where(diag)
    tool, _ = _versions(diag)
    if python_patch_only(tool, cluster):
        return (f"This side's Python {tool.get('python')} is not the cluster's {cluster.get('python')}, and Ray refuses a "
                f"driver of another Python patch release. Rerun with `{MATCH_MINOR} bash {DIAGNOSE} {addr}{job}` (read "
                f"by recent Ray releases: the same minor release runs the same bytecode), or with the cluster's exact "
                f"Python {cluster.get('python')} beside Ray {cluster.get('ray')} (`DEBUG_HANG_PYTHON=...`).")
    venv, install = install_beside(cluster)
    dashboard = diag.snapshot.dashboard_url if diag.snapshot is not None and diag.snapshot.dashboard_url else "http://HEAD:8265"
    return (f"Install the cluster's Ray beside debug-hang and rerun with it: `{install}`, then "
            f"`DEBUG_HANG_PYTHON={venv}/bin/python bash {DIAGNOSE} {addr}{job}`. Or run the diagnosis on the "
            f"cluster's own Ray, as a job from the skill folder: `ray job submit --address {shlex.quote(dashboard)} "
            f"--working-dir . -- bash {DIAGNOSE}{job}` (references/running-outside-the-cluster.md).")


def _helper_fix(diag: Diagnosis) -> str:
    addr, job = _where(diag)
    node, pids = _first_blind(diag, TOOL_KINDS)
    return (f"Take the stacks without the helper: `python3 {NODE_RUNNER} --address {addr} -n {node} -- py-spy dump "
            f"--pid {pids[0]}` for each of pid(s) {', '.join(pids)} (a plain command, no debug-hang code on the node), "
            f"or `py-spy dump --pid PID` in a shell on that node; read the dumps with `python3 scripts/parse_stacks.py "
            f"dumps.txt --format json` piped into `python3 scripts/match_patterns.py - --format summary`. Then report the error "
            f"above with the versions (rerun with DEBUG_HANG_TRACEBACK=1 `bash {DIAGNOSE} {addr}{job}`).")


def _first_blind(diag: Diagnosis, kinds: tuple[str, ...]) -> tuple[str, list[str]]:
    """(node id prefix, pids) of the processes a failure of these kinds hid, on its first node."""
    blind = [b for b in diag.uninspected if b.get("kind") in kinds] or list(diag.uninspected)
    node = next((str(b["node_id"]) for b in blind if b.get("node_id")), None)
    if node is None:
        node = next((e.node_id for e in diag.collection.errors + diag.errors if e.kind in kinds and e.node_id), None)
    pids = [str(b["pid"]) for b in blind if b.get("node_id") == node and b.get("pid")] or ["PID"]
    return (node[:12] if node else "NODE"), pids


# ---------------------------------------------------------------- one next step per failure kind

def _dominant_kind(diag: Diagnosis) -> str | None:
    """The kind of failure that hid the most processes in unfinished calls (None: nothing hidden)."""
    counts: dict[str, int] = {}
    for b in diag.uninspected:
        counts[str(b.get("kind"))] = counts.get(str(b.get("kind")), 0) + 1
    return max(counts, key=lambda k: counts[k]) if counts else None


def failure_step(diag: Diagnosis) -> tuple[str, str] | None:
    """(command, why) for the failure that left processes without a stack, chosen by its kind;
    None when no process was hidden by a failure (the caller decides from the stacks then)."""
    problem = tool_problem(diag)
    if problem is not None and problem.errors:
        return _tool_step(diag, problem)
    kind = _dominant_kind(diag)
    if kind is None:
        return None
    addr, job = _where(diag)
    node, pids = _first_blind(diag, (kind,))
    rerun = f"bash {DIAGNOSE} {addr}{job}"
    by_hand = f"python3 {NODE_RUNNER} --address {addr} -n {node} -- py-spy dump --pid {pids[0]}"
    steps: dict[str, tuple[str, str]] = {
        "permission-denied": (rerun, "py-spy was refused (ptrace): run as root, or add SYS_PTRACE on the node/pod named "
                              "in 'What could not be collected', then rerun"),
        "pyspy-missing": (rerun, "py-spy is missing on a node named in 'What could not be collected': pip install "
                          "py-spy there, then rerun"),
        "dump-timeout": (f"{rerun} --nonblocking", "py-spy did not finish on a process (uninterruptible sleep, or a "
                         "loaded node): --nonblocking reads it without pausing it"),
        "uninterruptible": (f"{rerun} --nonblocking", "a process in uninterruptible sleep cannot be paused for --native: "
                            "--nonblocking reads its Python stack without pausing it"),
        "bad-output": (f"python3 {NODE_RUNNER} --address {addr} -n {node} -- py-spy --version",
                       "py-spy's answer on that node was not its JSON: it must be 0.3.14 or newer"),
        "pyspy-failed": (by_hand, "py-spy failed on that node: run it by hand there to see its whole error"),
        "not-scheduled": (f"{rerun} --deadline 300", "no helper could start on the node in time (node overloaded, or "
                          "its raylet unresponsive: `ray status`); a longer deadline gives it time"),
        "helper-crashed": (by_hand, "the helper's worker died on the node (OOM killer, node lost): dump the process by "
                           "hand, and check the node's memory"),
        "helper-failed": (f"python3 {NODE_RUNNER} --address {addr} --list", "the helper task could not run on the node: "
                          "check that the node is listed alive, then dump by hand with -n NODE -- py-spy dump --pid PID"),
    }
    return steps.get(kind)


def _tool_step(diag: Diagnosis, problem: ToolProblem) -> tuple[str, str]:
    addr, job = _where(diag)
    if problem.kind == VERSION_MISMATCH and python_patch_only(problem.tool, problem.cluster):
        return (f"{MATCH_MINOR} bash {DIAGNOSE} {addr}{job}",
                f"a version problem, not a finding about the job ({problem.sides}): Ray refuses a driver of another "
                "Python patch release unless told to compare the minor release only")
    if problem.kind == VERSION_MISMATCH:
        venv, install = install_beside(problem.cluster)
        return (f"{install} && DEBUG_HANG_PYTHON={venv}/bin/python bash {DIAGNOSE} {addr}{job}",
                f"a version problem, not a finding about the job ({problem.sides}): install the cluster's Ray "
                "version beside debug-hang and rerun with it")
    node, pids = _first_blind(diag, TOOL_KINDS)
    return (f"python3 {NODE_RUNNER} --address {addr} -n {node} -- py-spy dump --pid {pids[0]}",
            f"debug-hang's node helper failed ({problem.errors[0][:200]}; {problem.sides}): take the stacks without "
            f"it, one plain py-spy command per process ({', '.join(pids)}), then parse_stacks.py | match_patterns.py")
