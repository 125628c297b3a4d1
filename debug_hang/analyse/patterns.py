"""The pattern catalog (references/patterns.yaml) and the stack matcher.

Each thread is classified by the patterns whose stack signature finds a *deciding frame* in it;
a thread that matches nothing is `unknown`, never forced into a pattern. Each process gets a
verdict: blocked on X, busy, idle.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from debug_hang.analyse.native_waits import mark_gil_holder, native_user_frame, shows_all_threads
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.errors import BadInputError
from debug_hang.model import Frame, Process, Thread
from debug_hang.paths import bundle_root

CATALOG_PATH = bundle_root() / "references" / "patterns.yaml"
CATALOG_SCHEMA = "debug-hang/patterns/v1"
KINDS = ("symptom", "root-cause", "benign")
DETECTS = ("stack", "state", "graph")
EDGES = ("submitted-tasks", "own-calls", "collective-peers", "placement-group",
         "queue-producers", "child-process", "train-barrier", "lock-holder", "serve-replicas", "dataset-operators",
         "socket-peer", "pool-holders", "none")
# cpu: how real CPU use (read on the node over the sampling window) bears on a stack reading.
CPU_RULES = ("busy", "idle")
# Files of the Python runtime and installed packages: never the job's own code.
# A thread's reading: a catalog id, or "unknown" (no pattern recognises the stack).
Reading = PatternId | Literal["unknown"]
# A process's verdict from its threads' readings.
ProcessState = Literal["blocked", "busy", "idle", "unknown", "error"]
_LIBRARY_FILE = re.compile(r"(/site-packages/|/dist-packages/|/lib/python\d+\.\d+/|^<frozen )")


@dataclass(frozen=True)
class FrameRule:
    function: re.Pattern[str] | None
    file: re.Pattern[str] | None
    code: re.Pattern[str] | None
    name: str | None = None  # a housekeeping loop's name (ray-housekeeping's entries)
    innermost: bool = False  # this entry must be the thread's innermost Python frame
    context: re.Pattern[str] | None = None  # searched in the numbered source lines around the frame
    native: bool = False  # matches native (C/C++) frames only; the other rules match Python frames
    below_python: bool = False  # a native frame called directly by a Python frame
    without_python: bool = False  # only in a stack with no Python frame (gdb's bt without py-bt)
    below_job_code: bool = False  # a native frame called directly by a Python frame of the job's code
    without_native: bool = False  # a Python rule read only when the stack has no native frame
    caller: re.Pattern[str] | None = None  # searched in "function file" of the frame that called it

    def matches(self, frame: Frame) -> bool:
        if not frame.file and self.file:
            return self._matches_name_only(frame)
        if self.function and not self.function.search(frame.function):
            return False
        if self.file and not self.file.search(frame.file):
            return False
        if self.code and not (frame.code and self.code.search(frame.code)):
            return False
        if self.context and not (frame.context and self.context.search("\n".join(frame.context))):
            return False
        return True

    def _matches_name_only(self, frame: Frame) -> bool:
        """A pasted arrow chain (`poll -> get`) names functions, not files: a rule that names a
        function decides by it alone, and only for a name that says what it is (`get_objects`,
        `Queue.get`, `_acquireLock`; never a bare `get` or `wait`)."""
        if self.function is None or self.code is not None:
            return False
        name = frame.function.lstrip("_")
        telling = "." in name or "_" in name or any(c.isupper() for c in name[1:])
        return telling and self.function.search(frame.function) is not None


@dataclass(frozen=True)
class Pattern:
    id: PatternId
    title: str
    kind: str
    detect: str
    meaning: str
    leads_to: str
    edge: str
    root_causes: tuple[str, ...]
    fixes: tuple[str, ...]
    references: tuple[str, ...]
    states: tuple[str, ...] = ()
    frames: tuple[FrameRule, ...] = ()
    requires: tuple[FrameRule, ...] = ()
    # At least one of these is on the stack too (two ways the same fact shows: asyncio's loop in
    # Python, or a coroutine awaiting its callee under a loop written in C such as uvloop).
    requires_any: tuple[FrameRule, ...] = ()
    excludes: tuple[FrameRule, ...] = ()
    innermost: bool = False
    active: bool | None = None
    priority: int = 0  # a more specific reading of the same stack wins (pg.ready() over ray.get)
    # "busy": the reading needs real CPU use (else the stack is re-read as idle); "idle": it holds
    # only without it (else the stack is re-read without this pattern). See Settings.busy_cpu_percent.
    cpu: str | None = None
    library_penalty: float = 0.0  # confidence taken off when the deciding stack ends in library code
    # Frames known to hold the lock this pattern's `frames` wait for (a graph reading: the holder
    # is another thread of the same process).
    holds: tuple[FrameRule, ...] = ()
    # A benign reading is dropped when one of these patterns decides the thread at a frame further
    # in: what the thread waits on wins over where it runs.
    overridden_by: tuple[PatternId, ...] = ()
    # Kernel functions a thread sleeps in (its /proc wchan) that mean this wait (file-lock-wait).
    kernel_waits: tuple[re.Pattern[str], ...] = ()
    # Numbers this pattern's rule decides with (ages, in seconds), as data: {name: value}.
    thresholds: dict[str, float] = field(default_factory=dict)
    # Native readings: the deciding frame is the outermost frame the native rules match in the
    # innermost run of native frames (the API the code called, not the futex under it).
    extend: bool = False
    # Only read in a process whose dump shows every thread and holds one thread.
    single_thread: bool = False
    # Only read on the thread that holds the GIL while other threads wait for it.
    gil_holder: bool = False
    # A root cause's falsifier: the one observation that would show the finding wrong (the
    # report's proof ends with it).
    disproved_by: str = ""

    @property
    def fix(self) -> str:
        return self.fixes[0] if self.fixes else ""


@dataclass(frozen=True)
class Settings:
    """The catalog's numbers: CPU thresholds and how sure each kind of finding is."""

    busy_cpu_percent: float = 30.0
    # A thread that never pauses is runnable (on a CPU or in the run queue) nearly all the window,
    # however small its share of a loaded CPU; one runnable less than this sleeps between bursts.
    spin_runnable_percent: float = 80.0
    cpu_evidence_percent: float = 50.0
    cycle_confidence: float = 0.9
    partial_cycle_confidence: float = 0.7
    chain_end_confidence: float = 0.85
    unrecognised_end_confidence: float = 0.4
    confident: float = 0.8
    noise_below: float = 0.5
    truncated_penalty: float = 0.15  # taken off every finding when the job's State API rows were cut


@dataclass
class ThreadMatch:
    """A thread's classification: the best pattern, its deciding frame, and the runners-up."""

    pattern: Reading
    confidence: float
    frame: Frame | None
    frame_index: int | None
    also: list[PatternId] = field(default_factory=list)
    user_frame: Frame | None = None  # the innermost frame of the job's own code, if any
    # What the wait is on when another thread of the process shows it (the GIL's holder).
    waits_for: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pattern": self.pattern,
            "confidence": round(self.confidence, 2),
            "frame": _frame_dict(self.frame),
            "user_frame": _frame_dict(self.user_frame),
            "also": self.also,
        }
        if self.waits_for:
            out["waits_for"] = self.waits_for
        return out


def _frame_dict(frame: Frame | None) -> dict[str, Any] | None:
    if frame is None:
        return None
    return {"function": frame.function, "file": frame.file, "line": frame.line, "code": frame.code}


# `Class.` right after `^`, `(` or `|` in a rule's function: made optional, because tracebacks and
# faulthandler print bare function names (`get (queue.py:171)` for `Queue.get`); the rule's file
# keeps the match specific.
_QUALIFIER = re.compile(r"(?<=[\^(|])([A-Z]\w*)\\\.")


def _rule(raw: dict[str, Any], where: str) -> FrameRule:
    try:
        return FrameRule(
            function=re.compile(_QUALIFIER.sub(r"(?:\1\\.)?", raw["function"]))
            if raw.get("function") else None,
            file=re.compile(raw["file"]) if raw.get("file") else None,
            code=re.compile(raw["code"]) if raw.get("code") else None,
            name=str(raw["name"]) if raw.get("name") else None,
            innermost=bool(raw.get("innermost", False)),
            context=re.compile(raw["context"]) if raw.get("context") else None,
            native=bool(raw.get("native", False)),
            below_python=bool(raw.get("below_python", False)),
            without_python=bool(raw.get("without_python", False)),
            below_job_code=bool(raw.get("below_job_code", False)),
            without_native=bool(raw.get("without_native", False)),
            caller=re.compile(raw["caller"]) if raw.get("caller") else None,
        )
    except re.error as exc:
        raise BadInputError(f"{where}: invalid regular expression: {exc}") from None


# libyaml's C loader reads the catalog ~60x faster than the pure-Python one (3 ms against 200 ms);
# PyYAML built without libyaml falls back to the pure-Python safe loader.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_catalog(path: str) -> Any:
    """The parsed YAML document of a catalog file (parsed once per version of the file)."""
    try:
        stat = Path(path).stat()
    except OSError as exc:
        raise BadInputError(f"cannot read pattern catalog {path}: {exc}") from None
    return _parse_catalog(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _parse_catalog(path: str, _mtime_ns: int, _size: int) -> Any:
    try:
        return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInputError(f"cannot read pattern catalog {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise BadInputError(f"pattern catalog {path} is not valid YAML: {str(exc).splitlines()[0]}") from None


def load_catalog(path: Path | str = CATALOG_PATH) -> list[Pattern]:
    """Load and validate the catalog; raises BadInputError naming what is wrong."""
    doc = _read_catalog(str(path))
    if not isinstance(doc, dict) or doc.get("schema") != CATALOG_SCHEMA:
        raise BadInputError(f"{path}: expected a mapping with schema: {CATALOG_SCHEMA}")
    patterns: list[Pattern] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc.get("patterns") or []):
        where = f"{path}: pattern #{i + 1}"
        if not isinstance(raw, dict) or not raw.get("id"):
            raise BadInputError(f"{where}: needs an id")
        pid = str(raw["id"])
        if pid in seen:
            raise BadInputError(f"{where}: duplicate id {pid}")
        seen.add(pid)
        if raw.get("kind") not in KINDS or raw.get("detect") not in DETECTS or raw.get("edge") not in EDGES:
            raise BadInputError(f"{where} ({pid}): kind, detect and edge must be one of {KINDS}, {DETECTS}, {EDGES}")
        stack = raw.get("stack") or {}
        if raw["detect"] == "stack" and not stack.get("frames"):
            raise BadInputError(f"{where} ({pid}): detect: stack needs stack.frames")
        for key in ("title", "meaning", "leads_to"):
            if not raw.get(key):
                raise BadInputError(f"{where} ({pid}): missing {key}")
        for key in ("root_causes", "fixes", "references", "states"):
            if not all(isinstance(item, str) for item in raw.get(key) or ()):
                raise BadInputError(f"{where} ({pid}): every item of {key} must be text (quote items that contain ': ')")
        patterns.append(Pattern(
            id=cast(PatternId, pid), title=str(raw["title"]), kind=raw["kind"], detect=raw["detect"],
            meaning=str(raw["meaning"]).strip(), leads_to=str(raw["leads_to"]), edge=raw["edge"],
            root_causes=tuple(raw.get("root_causes") or ()), fixes=tuple(raw.get("fixes") or ()),
            references=tuple(raw.get("references") or ()), states=tuple(raw.get("states") or ()),
            frames=tuple(_rule(r, where) for r in stack.get("frames") or ()),
            requires=tuple(_rule(r, where) for r in stack.get("requires") or ()),
            requires_any=tuple(_rule(r, where) for r in stack.get("requires_any") or ()),
            excludes=tuple(_rule(r, where) for r in stack.get("excludes") or ()),
            innermost=bool(stack.get("innermost", False)),
            active=stack.get("active"),
            priority=int(raw.get("priority", 0)),
            cpu=_cpu_rule(raw.get("cpu"), f"{where} ({pid})"),
            library_penalty=float(raw.get("library_penalty", 0.0)),
            holds=tuple(_rule(r, where) for r in stack.get("holds") or ()),
            overridden_by=tuple(cast(PatternId, str(x)) for x in stack.get("overridden_by") or ()),
            kernel_waits=tuple(_regex(r, where) for r in raw.get("kernel_waits") or ()),
            thresholds=_thresholds(raw.get("thresholds"), where),
            extend=bool(stack.get("extend", False)),
            single_thread=bool(stack.get("single_thread", False)),
            gil_holder=bool(stack.get("gil_holder", False)),
            disproved_by=str(raw.get("disproved_by") or ""),
        ))
    for pattern in patterns:
        unknown = sorted(set(pattern.overridden_by) - seen)
        if unknown:
            raise BadInputError(f"{path} ({pattern.id}): overridden_by names unknown patterns {unknown}")
    return patterns


def _regex(text: Any, where: str) -> re.Pattern[str]:
    try:
        return re.compile(str(text))
    except re.error as exc:
        raise BadInputError(f"{where}: invalid regular expression {text!r}: {exc}") from None


def _thresholds(raw: Any, where: str) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, (int, float)) for v in raw.values()):
        raise BadInputError(f"{where}: thresholds must map names to numbers")
    return {str(k): float(v) for k, v in raw.items()}


def _cpu_rule(value: Any, where: str) -> str | None:
    if value is not None and value not in CPU_RULES:
        raise BadInputError(f"{where}: cpu must be one of {CPU_RULES}")
    return None if value is None else str(value)


def load_settings(path: Path | str = CATALOG_PATH) -> Settings:
    """The catalog's `settings` mapping (thresholds, confidences); defaults for what it omits."""
    doc = _read_catalog(str(path))
    raw = (doc.get("settings") if isinstance(doc, dict) else None) or {}
    known = Settings.__dataclass_fields__
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise BadInputError(f"{path}: unknown settings {unknown}; known: {sorted(known)}")
    return Settings(**{k: float(v) for k, v in raw.items()})


@lru_cache(maxsize=1)
def settings() -> Settings:
    """The shipped catalog's settings (loaded once)."""
    return load_settings()


@lru_cache(maxsize=1)
def catalog() -> dict[str, Pattern]:
    """The shipped catalog by id (loaded once)."""
    return {p.id: p for p in load_catalog()}


def housekeeping_rules() -> list[FrameRule]:
    """Ray's housekeeping loops, by name: the named frames of the shipped catalog's benign patterns
    (the one list; parse_stacks.py's grouping sets the same threads aside)."""
    return [r for p in catalog().values() if p.kind == "benign" for r in p.frames if r.name]


def is_library(frame: Frame) -> bool:
    """True for frames of the Python runtime or an installed package, not the job's own code.

    Full paths decide by folder; short ones (py-spy's text output: `ray/_private/worker.py`,
    `threading.py`) by their first component: a stdlib module or an importable installed package.
    """
    if frame.native or _LIBRARY_FILE.search(frame.file):
        return True
    if frame.file.startswith("/") or not frame.file:
        return False
    return _is_library_root(frame.file.split("/", 1)[0].removesuffix(".py"))


@lru_cache(maxsize=4096)
def _is_library_root(name: str) -> bool:
    if name in sys.stdlib_module_names:
        return True
    if not name.isidentifier():
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = (spec.origin or "") if spec else ""
    return bool(spec) and bool(_LIBRARY_FILE.search(origin))


def _python_frames(thread: Thread) -> list[tuple[int, Frame]]:
    return [(i, f) for i, f in enumerate(thread.frames) if not f.native]


def match_thread(thread: Thread, patterns: list[Pattern] | None = None, single: bool = False,
                 holder: bool = False) -> ThreadMatch:
    """Classify one thread. Specific patterns win over generic ones (catalog order breaks ties).
    `single`: the thread is the only one of a process whose dump shows all its threads;
    `holder`: it holds the GIL while other threads of its process wait for it.

    With the shipped catalog, a stack seen before (thousands of ranks share a handful of stacks)
    is matched once: the result is kept by stack shape and re-attached to this thread's frames.
    """
    if patterns is not None:
        return _match_thread(thread, patterns, single, holder)
    key = (thread.active, single, holder, tuple((f.function, f.file, f.code, f.native) for f in thread.frames))
    hit = _SEEN.get(key)
    if hit is None:
        match = _match_thread(thread, list(catalog().values()), single, holder)
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.clear()
        _SEEN[key] = hit = (match.pattern, match.confidence, match.frame_index, tuple(match.also),
                            _index_of(thread, match.user_frame))
    pattern, confidence, index, also, user = hit
    return ThreadMatch(pattern, confidence, None if index is None else thread.frames[index], index, list(also),
                       None if user is None else thread.frames[user])


# Stack shape -> (pattern, confidence, deciding frame index, runners-up, job-code frame index).
_SEEN: dict[tuple[Any, ...], tuple[Reading, float, int | None, tuple[PatternId, ...], int | None]] = {}
_SEEN_MAX = 100_000


def _index_of(thread: Thread, frame: Frame | None) -> int | None:
    return None if frame is None else next(i for i, f in enumerate(thread.frames) if f is frame)


def _match_thread(thread: Thread, patterns: list[Pattern], single: bool = False,
                  holder: bool = False) -> ThreadMatch:
    frames = _python_frames(thread)
    natives = [(i, f) for i, f in enumerate(thread.frames) if f.native]
    if not frames and not natives:
        return ThreadMatch("unknown", 0.0, None, None)
    hits: list[tuple[float, int, Pattern, int, Frame]] = []
    has_user_code = any(not is_library(f) for _, f in frames)
    for order, pattern in enumerate(patterns):
        if pattern.detect != "stack" or not pattern.frames or (pattern.single_thread and not single) \
                or (pattern.gil_holder and not holder):
            continue
        if pattern.kind == "benign" and has_user_code:
            continue  # the job's own code is on the stack: not just Ray's machinery
        if pattern.active is not None and thread.active != pattern.active \
                and (thread.active is not None or pattern.active):
            continue  # a busy pattern needs a dumper that saw the thread run (py-spy's state)
        if pattern.requires and not all(_on_stack(r, frames, natives) for r in pattern.requires):
            continue
        if pattern.requires_any and not any(_on_stack(r, frames, natives) for r in pattern.requires_any):
            continue
        if pattern.excludes and any(_on_stack(r, frames, natives) for r in pattern.excludes):
            continue
        found = _deciding_frame(pattern, thread, frames, natives)
        if found is None:
            continue
        index, frame, among = found
        hits.append((_confidence(pattern, thread, among, index), order, pattern, index, frame))
    hits = _drop_overridden(hits)
    user = next((f for _, f in frames if not is_library(f)), None) if frames else native_user_frame(natives)
    if not hits:
        if not frames:
            return ThreadMatch("unknown", 0.0, None, None, user_frame=user)
        return ThreadMatch("unknown", 0.0, frames[0][1], frames[0][0], user_frame=user)
    hits.sort(key=lambda h: (-h[2].priority, -h[0], h[1]))
    best = hits[0]
    return ThreadMatch(best[2].id, best[0], best[4], best[3], also=[h[2].id for h in hits[1:]], user_frame=user)


def _on_stack(rule: FrameRule, frames: list[tuple[int, Frame]], natives: list[tuple[int, Frame]]) -> bool:
    return any(rule.matches(f) for _, f in (natives if rule.native else frames))


def _deciding_frame(pattern: Pattern, thread: Thread, frames: list[tuple[int, Frame]],
                    natives: list[tuple[int, Frame]]) -> tuple[int, Frame, list[tuple[int, Frame]]] | None:
    """The innermost frame a rule of the pattern matches: Python rules first (what the job's code
    waits on), native rules when no Python frame decides (`extend`: out to the API called)."""
    python_rules = [r for r in pattern.frames if not r.native and not (r.without_native and natives)]
    if frames and python_rules:
        candidates = frames[:1] if pattern.innermost else frames
        inner = frames[0][0]
        found = next(((i, f) for i, f in candidates
                      if any(r.matches(f) and (i == inner or not r.innermost) for r in python_rules)), None)
        if found is not None:
            return found[0], found[1], frames
    native_rules = [r for r in pattern.frames if r.native and not (r.without_python and frames)]
    if not natives or not native_rules:
        return None
    stack = thread.frames
    for pos, (i, f) in enumerate(natives):
        caller = stack[i + 1] if i + 1 < len(stack) else None
        if any(r.matches(f) and _called_as(r, caller) for r in native_rules):
            if pattern.extend:
                pos = _extend(natives, pos, native_rules)
            return natives[pos][0], natives[pos][1], natives
    return None


def _called_as(rule: FrameRule, caller: Frame | None) -> bool:
    """The conditions a native rule puts on the frame that called the matched one."""
    if rule.below_python and (caller is None or caller.native):
        return False
    if rule.below_job_code and (caller is None or caller.native or is_library(caller)):
        return False
    return rule.caller is None or (caller is not None and rule.caller.search(f"{caller.function} {caller.file}") is not None)


def _extend(natives: list[tuple[int, Frame]], pos: int, rules: list[FrameRule]) -> int:
    """The outermost native frame a rule matches in the run of native frames from `pos` out."""
    best = pos
    for k in range(pos + 1, len(natives)):
        if natives[k][0] != natives[k - 1][0] + 1:
            break  # a Python frame in between: the wait's native part ended
        if any(r.matches(natives[k][1]) for r in rules):
            best = k
    return best


def _drop_overridden(hits: list[tuple[float, int, Pattern, int, Frame]]) -> list[tuple[float, int, Pattern, int, Frame]]:
    """A housekeeping loop that waits, further in than its loop frame, on something in its
    `overridden_by` list (a lock, a remote result, a collective) is read by that wait."""
    waits = {h[2].id: h[3] for h in hits}
    return [h for h in hits if not any(waits.get(other, h[3]) < h[3] for other in h[2].overridden_by)]


def _confidence(pattern: Pattern, thread: Thread, frames: list[tuple[int, Frame]], index: int) -> float:
    """How sure a match is: innermost deciding frames and the expected thread state count most."""
    score = 0.6
    position = next(pos for pos, (i, _) in enumerate(frames) if i == index)
    score += 0.2 if position <= 2 else 0.0  # a wait is decided near the top of the stack
    if not frames[position][1].file:
        score -= 0.3  # decided by a function name alone (a pasted arrow chain)
    if pattern.active is not None and thread.active is not None:
        score += 0.1
    if pattern.requires or pattern.requires_any:
        score += 0.15  # the more specific signature (async-loop-blocked over ray-get-wait)
    if pattern.kind == "benign":
        score = 0.98  # Ray's own machinery (only tried when no job code is on the stack)
    if pattern.library_penalty and is_library(frames[0][1]):
        score -= pattern.library_penalty  # e.g. spinning inside a library tells less than in job code
    return max(0.05, min(score, 0.99))


@dataclass
class ProcessVerdict:
    """One process: its threads' matches and a summary verdict."""

    process: Process
    threads: list[tuple[Thread, ThreadMatch]]
    verdict: ProcessState
    main: ThreadMatch | None  # the thread match that decides the verdict

    @property
    def pattern(self) -> Reading | None:
        return self.main.pattern if self.main else None


def match_process(proc: Process, patterns: list[Pattern] | None = None) -> ProcessVerdict:
    """Classify every thread of a process and decide: blocked on X / busy / idle / unknown."""
    cat = catalog()
    if proc.error:
        return ProcessVerdict(proc, [], "error", None)
    single = len(proc.threads) == 1 and shows_all_threads(proc)
    matched = [(t, match_thread(t, patterns, single)) for t in proc.threads]
    holder = mark_gil_holder(matched)
    if holder is not None:  # read again as the GIL's holder: where it blocks is the cause
        matched = [(t, match_thread(t, patterns, single, holder=True) if t is holder else m) for t, m in matched]
    relevant = [(t, m) for t, m in matched
                if m.pattern == "unknown" or cat[m.pattern].kind != "benign"]
    if any(not f.native for t in proc.threads for f in t.frames):
        # Threads with no Python frame in a Python process (Ray's C++ threads, NCCL's proxy,
        # py-spy --native) are the runtime's own: their generic waits are their idle points, and
        # the job's threads decide the process.
        matched = [(t, _runtime_thread(t, m)) for t, m in matched]
        relevant = [(t, m) for t, m in matched if (m.pattern == "unknown" or cat[m.pattern].kind != "benign")
                    and (t is holder or any(not f.native for f in t.frames))]
    if not relevant:
        return ProcessVerdict(proc, matched, "idle", _main_thread_match(matched))
    # Prefer the GIL's holder when others wait for it, known patterns, then threads in the job's
    # own code (a Tune or Ray Train training thread over the library's main thread waiting on
    # it), then the main thread.
    def rank(item: tuple[Thread, ThreadMatch]) -> tuple[int, int, int, int, float]:
        thread, match = item
        is_main = thread.name == "MainThread" or (thread.os_thread_id is not None and thread.os_thread_id == proc.pid)
        known = match.pattern != "unknown"
        return (0 if thread is holder else 1, 0 if known else 1, 0 if match.user_frame is not None else 1,
                0 if is_main else 1, -match.confidence)

    relevant.sort(key=rank)
    _, main = relevant[0]
    verdict: ProcessState
    if main.pattern == "busy-loop" or (main.pattern == "unknown" and relevant[0][0].active):
        verdict = "busy"
    elif main.pattern == "unknown":
        verdict = "unknown"
    else:
        verdict = "blocked"
    return ProcessVerdict(proc, matched, verdict, main)


# Native readings that say only "waits on a lock or a condition": on a runtime thread of a Python
# process they are that thread's idle point, not a finding.
_GENERIC_NATIVE: tuple[PatternId, ...] = ("native-lock-wait", "native-condition-wait")


def _runtime_thread(thread: Thread, match: ThreadMatch) -> ThreadMatch:
    if match.pattern != "unknown" and match.pattern in _GENERIC_NATIVE and all(f.native for f in thread.frames):
        return ThreadMatch("unknown", 0.0, None, None, also=[match.pattern])
    return match


def _main_thread_match(matched: list[tuple[Thread, ThreadMatch]]) -> ThreadMatch | None:
    for thread, match in matched:
        if thread.name == "MainThread":
            return match
    return matched[0][1] if matched else None
