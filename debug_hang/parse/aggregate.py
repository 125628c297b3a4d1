"""Fold thousands of thread stacks into a few groups, and point at the processes that differ.

A thread's *signature* is its stack, innermost first, as (function, short file[, line]) with Ray
and runtime wrapper frames removed (`WRAPPER_FRAMES`) and native frames left out (their
addresses differ in every process). Function names are compared without their class qualifier,
so py-spy 0.4 (`Thread.run`), older py-spy and faulthandler (`run`) dumps of one stack agree.

Threads with the same signature form a *group*; groups are listed largest first. Ray's own
housekeeping threads (`HOUSEKEEPING_RULES`, `HOUSEKEEPING_TITLES`) are set aside unless asked for.
Processes of one *role* (same actor class, task name or, outside Ray, same command line) are
compared by the set of their visible thread signatures: those that differ from the role's
majority are *outliers*, the fewest-alike first — in a collective hang, the odd rank.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from debug_hang.model import Frame, Process, Thread, short_path
from debug_hang.paths import bundle_root
from debug_hang.perf import paused_gc

# (function regex, short-file regex): frames a stack passes through on its way to user code,
# the same in every Ray worker. Observed in Ray 2.60 dumps (tests/data/formats/ray*/) and in
# torch 2.x `c10d_logger` (tests/data/dumps/gloo_skipped_allreduce/).
WRAPPER_FRAMES: tuple[tuple[str, str], ...] = (
    (r"(^|\.)_resume_span$", r"ray/util/tracing/tracing_helper\.py$"),
    (r"(^|\.)async_span_wrapper$", r"ray/util/tracing/tracing_helper\.py$"),
    (r"(^|\.)actor_method_executor$", r"ray/_private/function_manager\.py$"),
    (r"(^|\.)main_loop$", r"ray/_private/worker\.py$"),
    (r"^<module>$", r"(^|/)default_worker\.py$"),
    (r"(^|\.)wrapper$", r"ray/_private/client_mode_hook\.py$"),
    (r"(^|\.)auto_init_wrapper$", r"ray/_private/auto_init_hook\.py$"),
    (r"(^|\.)wrapper$", r"torch/distributed/c10d_logger\.py$"),
    (r"(^|\.)(_bootstrap|_bootstrap_inner|run)$", r"(^|/)threading\.py$"),
)


@dataclass(frozen=True)
class HousekeepingRule:
    """A thread is housekeeping of `kind` when one of its Python frames (`where="any"`) or its
    innermost Python frame (`where="innermost"`) matches both regexes (function; short file)."""

    kind: str
    function: str
    file: str
    where: str = "any"


def catalog_housekeeping(path: Path | None = None) -> tuple[HousekeepingRule, ...]:
    """Ray's housekeeping loops, by name: the named frames of the benign patterns of the catalog
    (references/patterns.yaml, `ray-housekeeping`: the one list the matcher uses too). An entry
    with `innermost: true` must be the thread's innermost Python frame (an idle pool worker)."""
    doc = yaml.load((path or bundle_root() / "references" / "patterns.yaml").read_text(encoding="utf-8"),
                    Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - a safe loader
    return tuple(HousekeepingRule(str(f["name"]), str(f.get("function") or ""), str(f.get("file") or ""),
                                  "innermost" if f.get("innermost") else "any")
                 for pattern in doc.get("patterns") or () if pattern.get("kind") == "benign"
                 for f in (pattern.get("stack") or {}).get("frames") or () if f.get("name"))


# Ray's own threads (the catalog's list), plus an idle selector loop (an event loop or a gRPC
# poller with nothing to do). A thread whose every Python frame is a wrapper (an idle worker's
# main loop, gRPC's poller thread, a frameless native thread) is housekeeping of kind
# "runtime-only" without a rule (gRPC's `_poll_wrapper` threads look so: their frames are
# Cython, native to py-spy).
HOUSEKEEPING_RULES: tuple[HousekeepingRule, ...] = (
    *catalog_housekeeping(),
    HousekeepingRule("idle-selector", r"(^|\.)select$", r"(^|/)selectors\.py$", "innermost"),
)

# Titles (process command lines) of Ray's system processes: every thread of theirs is
# housekeeping. `ray stack` dumps the agents along with the workers.
HOUSEKEEPING_TITLES: tuple[str, ...] = (
    r"^ray::(DashboardAgent|RuntimeEnvAgent|JobSupervisor)\b",
    r"^ray-dashboard-",
    r"ray/dashboard/(dashboard|agent)\.py",
    r"ray/autoscaler/_private/monitor\.py",
    r"ray/_private/log_monitor\.py",
    r"ray/_private/runtime_env/agent/main\.py",
    r"-m ray\.util\.client\.server",
)

RUNTIME_ONLY = "runtime-only"
SYSTEM_PROCESS = "ray-system-process"
IDLE_SIGNATURE = "<no user frames: idle>"
_HEX_ADDRESS = re.compile(r"^0x[0-9a-fA-F]+$")
_NO_RULE = 1 << 30

FrameKey = tuple[str, str, "int | None"]


@dataclass
class AggregateOptions:
    lines: bool = False  # key on line numbers too (off: one wait at two lines is one group)
    show_housekeeping: bool = False
    native: bool = False  # key on native frames too (symbol names; addresses are dropped)


@dataclass
class Member:
    """One thread of a group, with what is known of its process."""

    pid: int | None
    sample: int
    thread_id: str | None
    thread_name: str | None
    active: bool | None
    role: str | None
    title: str | None
    rank: int | None
    node: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "sample": self.sample, "thread_id": self.thread_id,
                "thread_name": self.thread_name, "active": self.active, "role": self.role,
                "title": self.title, "rank": self.rank, "node": self.node}


@dataclass
class Group:
    """Threads sharing one signature; `frames` are those of the first member, wrappers removed."""

    id: str
    signature: tuple[FrameKey, ...]
    frames: list[Frame]
    housekeeping: str | None
    members: list[Member] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def processes(self) -> int:
        """Distinct processes (a pid dumped several times counts once; unknown pids each count)."""
        return len({m.pid if m.pid is not None else -i for i, m in enumerate(self.members, 1)})

    def states(self) -> dict[str, int]:
        counts: Counter[str] = Counter(
            "active" if m.active else ("idle" if m.active is False else "unknown")
            for m in self.members)
        return dict(counts)

    def to_dict(self, max_members: int | None = None) -> dict[str, Any]:
        members = self.members if max_members is None else self.members[:max_members]
        return {
            "id": self.id,
            "size": self.size,
            "processes": self.processes,
            "states": self.states(),
            "housekeeping": self.housekeeping,
            "frames": [{"function": f.function, "file": f.file, "line": f.line,
                        "native": f.native} for f in self.frames],
            "members": [m.to_dict() for m in members],
            "members_omitted": self.size - len(members),
        }


@dataclass
class Outlier:
    """A process whose visible stacks differ from the majority of its role."""

    role: str
    pid: int | None
    sample: int
    title: str | None
    rank: int | None
    node: str | None
    alike: int  # processes of the role with exactly this process's stacks (itself included)
    majority: int  # processes of the role sharing the most common stacks
    role_size: int
    group_ids: list[str]
    frames: list[Frame]  # innermost user frames of each visible thread (first 3 frames each)

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "pid": self.pid, "sample": self.sample, "title": self.title,
                "rank": self.rank, "node": self.node, "alike": self.alike,
                "majority": self.majority, "role_size": self.role_size,
                "group_ids": self.group_ids,
                "frames": [{"function": f.function, "file": f.file, "line": f.line}
                           for f in self.frames]}


@dataclass
class Aggregation:
    groups: list[Group]
    outliers: list[Outlier]
    hidden: dict[str, int]  # housekeeping kind -> threads hidden
    processes: int
    threads: int
    roles: dict[str, int]  # role -> processes
    no_majority: list[str]  # roles whose processes split evenly: no odd one out to name
    options: AggregateOptions

    def to_dict(self, max_groups: int | None = None, max_members: int | None = None) -> dict[str, Any]:
        groups = self.groups if max_groups is None else self.groups[:max_groups]
        return {
            "options": {"lines": self.options.lines,
                        "show_housekeeping": self.options.show_housekeeping,
                        "native": self.options.native},
            "processes": self.processes,
            "threads": self.threads,
            "hidden_housekeeping": dict(sorted(self.hidden.items())),
            "roles": dict(sorted(self.roles.items())),
            "no_majority": self.no_majority,
            "groups": [g.to_dict(max_members) for g in groups],
            "groups_omitted": len(self.groups) - len(groups),
            "outliers": [o.to_dict() for o in self.outliers],
        }


class Normalizer:
    """Classifies threads; the per-(function, file) work is cached, since most frames repeat
    across thousands of threads."""

    def __init__(self, options: AggregateOptions) -> None:
        self.options = options
        self.wrappers = [(re.compile(f), re.compile(p)) for f, p in WRAPPER_FRAMES]
        self.rules = [(r, re.compile(r.function), re.compile(r.file)) for r in HOUSEKEEPING_RULES]
        self.titles = [re.compile(t) for t in HOUSEKEEPING_TITLES]
        # (function, file) -> (bare function, short file, is wrapper, first "any" rule it
        # matches, first "innermost" rule it matches); _NO_RULE when none
        self.cache: dict[tuple[str, str], tuple[str, str, bool, int, int]] = {}
        self.title_cache: dict[str | None, bool] = {}

    def frame(self, f: Frame) -> tuple[str, str, bool, int, int]:
        key = (f.function, f.file)
        hit = self.cache.get(key)
        if hit is None:
            short = short_file(f.file)
            bare = bare_function(f.function)
            wrapper = not f.native and any(fr.search(f.function) and pr.search(short)
                                           for fr, pr in self.wrappers)
            any_rule = inner_rule = _NO_RULE
            if not f.native:
                for i, (rule, fre, pre) in enumerate(self.rules):
                    if pre.search(short) and fre.search(f.function):
                        if rule.where == "any":
                            any_rule = min(any_rule, i)
                        else:
                            inner_rule = min(inner_rule, i)
            hit = (bare, short, wrapper, any_rule, inner_rule)
            self.cache[key] = hit
        return hit

    def classify(self, thread: Thread, system: bool) -> tuple[tuple[FrameKey, ...], list[Frame],
                                                              str | None]:
        """(signature, kept frames, housekeeping kind or None) of one thread, in one pass.

        Thread rules come first, so one stack gets one kind wherever it runs; then every
        thread of a Ray system process is housekeeping."""
        lines = self.options.lines
        native = self.options.native
        key: list[FrameKey] = []
        kept: list[Frame] = []
        rule = _NO_RULE
        innermost_seen = False
        user_python = False
        cache = self.cache
        for f in thread.frames:
            if f.native and (not native or _HEX_ADDRESS.match(f.function)):
                continue
            hit = cache.get((f.function, f.file)) or self.frame(f)
            if not f.native:
                if not innermost_seen:
                    innermost_seen = True
                    rule = hit[4]
                if hit[3] < rule:
                    rule = hit[3]
            if hit[2]:
                continue
            user_python = user_python or not f.native
            key.append((hit[0], hit[1], f.line if lines else None))
            kept.append(f)
        if not user_python:
            kind: str | None = RUNTIME_ONLY
        elif rule != _NO_RULE:
            kind = self.rules[rule][0].kind
        else:
            kind = SYSTEM_PROCESS if system else None
        return tuple(key), kept, kind

    def signature(self, thread: Thread) -> tuple[tuple[FrameKey, ...], list[Frame], bool]:
        """(signature, kept frames, has a Python frame) of one thread."""
        sig, kept, _ = self.classify(thread, False)
        return sig, kept, any(not f.native for f in thread.frames)

    def housekeeping(self, proc_system: bool, thread: Thread, kept: list[Frame]) -> str | None:
        """The housekeeping kind of a thread (None: user work)."""
        return self.classify(thread, proc_system)[2]

    def system_process(self, title: str | None) -> bool:
        hit = self.title_cache.get(title)
        if hit is None:
            hit = bool(title) and any(t.search(title or "") for t in self.titles)
            self.title_cache[title] = hit
        return hit


def bare_function(function: str) -> str:
    """`Rank.train_step` → `train_step`; `f.<locals>.<lambda>` → `<lambda>`; `<module>` stays."""
    if "." not in function:
        return function
    return function.rsplit(".", 1)[1] or function


def short_file(path: str) -> str:
    """The file as py-spy shows it (`ray/_private/worker.py`, `threading.py`); the base name for
    other absolute paths, so faulthandler's full paths match py-spy's short ones."""
    short = short_path(path)
    if short.startswith("/") or (len(short) > 2 and short[1] == ":"):
        return short.replace("\\", "/").rsplit("/", 1)[-1]
    return short


def role_of(proc: Process) -> str | None:
    """What a process is, for comparing it with its peers: actor class, task name, or (outside
    Ray) its command line; None for pooled idle workers and processes of unknown title."""
    if proc.actor_class:
        return proc.actor_class
    if proc.task_name:
        return proc.task_name
    cls, _ = proc.title_parts
    if cls:
        return cls
    title = (proc.title or "").strip()
    if not title or title.startswith("ray::"):
        return None
    return title


def _node(proc: Process) -> str | None:
    return proc.node_id or proc.node_ip


def _group_id(signature: tuple[FrameKey, ...]) -> str:
    text = "\n".join(f"{f}|{p}|{ln}" for f, p, ln in signature)
    return hashlib.blake2b(text.encode(), digest_size=5).hexdigest()


def aggregate(processes: list[Process], options: AggregateOptions | None = None) -> Aggregation:
    """Group identical thread stacks across processes and name the outlier processes."""
    with paused_gc():
        return _aggregate(processes, options or AggregateOptions())


def _aggregate(processes: list[Process], opts: AggregateOptions) -> Aggregation:
    norm = Normalizer(opts)
    groups: dict[tuple[FrameKey, ...], Group] = {}
    hidden: Counter[str] = Counter()
    threads_total = 0
    # per process: (role, visible signatures, group ids, first frames)
    per_process: list[tuple[Process, str | None, tuple[tuple[FrameKey, ...], ...], list[str],
                            list[Frame]]] = []
    for proc in processes:
        system = norm.system_process(proc.title)
        # a failed dump (no thread) says nothing about where the process waits: not compared
        role = None if system or (proc.error and not proc.threads) else role_of(proc)
        visible: list[tuple[FrameKey, ...]] = []
        ids: list[str] = []
        heads: list[Frame] = []
        for thread in proc.threads:
            threads_total += 1
            sig, kept, kind = norm.classify(thread, system)
            if kind is not None:
                hidden[kind] += 1
                if not opts.show_housekeeping:
                    continue
            group = groups.get(sig)
            if group is None:
                group = groups[sig] = Group(id=_group_id(sig), signature=sig, frames=kept,
                                            housekeeping=kind)
            group.members.append(Member(
                pid=proc.pid, sample=proc.sample, thread_id=thread.thread_id,
                thread_name=thread.name, active=thread.active, role=role, title=proc.title,
                rank=proc.rank, node=_node(proc)))
            if kind is None:
                visible.append(sig)
                ids.append(group.id)
                heads.extend(kept[:3])
        # sorted by text: with --lines a line may be None beside an int, which do not compare
        per_process.append((proc, role, tuple(sorted(visible, key=str)), ids, heads))
    ordered = sorted(groups.values(), key=lambda g: (-g.size, g.housekeeping is not None, g.id))
    outliers, roles, no_majority = _outliers(per_process)
    return Aggregation(groups=ordered, outliers=outliers, hidden=dict(hidden),
                       processes=len(processes), threads=threads_total, roles=roles,
                       no_majority=no_majority, options=opts)


def _outliers(
    per_process: list[tuple[Process, str | None, tuple[tuple[FrameKey, ...], ...], list[str],
                            list[Frame]]],
) -> tuple[list[Outlier], dict[str, int], list[str]]:
    # A pid dumped several times (or in several formats) counts once: its first dump that
    # tells its role (a py-spy JSON dump carries no title).
    chosen: dict[int, int] = {}
    for i, (proc, role, _, _, _) in enumerate(per_process):
        if proc.pid is not None and (proc.pid not in chosen
                                     or (per_process[chosen[proc.pid]][1] is None and role)):
            chosen[proc.pid] = i
    by_role: dict[str, list[int]] = {}
    for i, (proc, role, _, _, _) in enumerate(per_process):
        if proc.pid is not None and chosen[proc.pid] != i:
            continue
        if role is not None:
            by_role.setdefault(role, []).append(i)
    outliers: list[Outlier] = []
    no_majority: list[str] = []
    for role, idxs in by_role.items():
        if len(idxs) < 3:
            continue  # with two processes that differ there is no majority to differ from
        counts = Counter(per_process[i][2] for i in idxs)
        (top, top_n), *rest = counts.most_common()
        if not rest:
            continue
        if rest[0][1] == top_n:
            no_majority.append(role)
            continue
        for i in idxs:
            proc, _, sig, ids, heads = per_process[i]
            if sig == top:
                continue
            outliers.append(Outlier(
                role=role, pid=proc.pid, sample=proc.sample, title=proc.title, rank=proc.rank,
                node=_node(proc), alike=counts[sig], majority=top_n, role_size=len(idxs),
                group_ids=ids, frames=heads))
    outliers.sort(key=lambda o: (o.alike, o.alike / o.role_size, o.role, o.pid or 0))
    roles = {role: len(idxs) for role, idxs in by_role.items()}
    return outliers, roles, sorted(no_majority)
