"""What the per-process progress readings say: progress, activity, or silence (pure).

The node probe reads, per process, what moved between the first and the last stack sample
(probe/progress.py: /proc/PID/io, context switches, log growth with the new lines). Here those
readings, the process's CPU use and its stack samples become `Finding`s, each with the strength
the rules give it (references/verdict_rules.yaml): `progress` (work was done: not a hang),
`activity` (something moved that need not be work: not sure) or `info`. The verdict uses them;
the report shows them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from debug_hang.analyse.patterns import is_library
from debug_hang.errors import BadInputError
from debug_hang.model import Process
from debug_hang.paths import bundle_root

PAGE = 4096
RULES_PATH = bundle_root() / "references" / "verdict_rules.yaml"
RULES_SCHEMA = "debug-hang/verdict-rules/v1"
STRENGTHS = ("progress", "activity", "info")
READINGS = ("write_bytes_beyond_logs", "wchar_beyond_logs", "read_bytes", "rchar", "advancing_counters",
            "novel_log_lines", "recent_counter", "loop_moved", "cpu_percent", "voluntary_ctxt_switches",
            "output_file_bytes")


@dataclass(frozen=True)
class SignalRule:
    id: str
    reading: str
    min: float
    strength: str
    says: str
    unless: tuple[str, ...] = ()
    below: float | None = None  # the reading counts only under this value (a stronger rule takes it from there)


@dataclass(frozen=True)
class LogRules:
    counters: tuple[re.Pattern[str], ...]
    time_like: tuple[re.Pattern[str], ...]
    ignore: tuple[re.Pattern[str], ...]
    recent_s: float


@dataclass(frozen=True)
class CrashLoopRules:
    min_restarts: int
    min_failed_attempts: int
    death_error_types: tuple[str, ...]
    death_reasons: tuple[re.Pattern[str], ...]
    min_repeated_tracebacks: int = 3  # a parent's log repeating one traceback this often in the window


@dataclass(frozen=True)
class BusyRules:
    spin_by_state_samples: int = 4
    spin_by_state_span_s: float = 3.0
    extra_samples: int = 4
    young_wait_s: float = 10.0
    paced_patterns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Rules:
    signals: tuple[SignalRule, ...]
    logs: LogRules
    families: dict[str, str]
    confidence: dict[str, float]
    crash_loop: CrashLoopRules
    inconclusive_when_silent: dict[str, str] = field(default_factory=dict)
    proven_stuck: frozenset[str] = frozenset()  # root causes that earlier activity does not make doubtful
    own_work_no_release: frozenset[str] = frozenset()  # root causes whose culprit's own activity releases nothing
    before_window_signals: frozenset[str] = frozenset()  # signals that read the log before the window
    proven_without_task_state: frozenset[str] = frozenset()  # root causes one process's stacks prove
    busy: BusyRules = BusyRules()  # when a busy thread spins, and how many more samples to take


def _compile(items: Any, where: str) -> tuple[re.Pattern[str], ...]:
    try:
        return tuple(re.compile(str(p)) for p in items or ())
    except re.error as exc:
        raise BadInputError(f"{where}: invalid regular expression: {exc}") from None


def load_rules(path: Path | str = RULES_PATH) -> Rules:
    """Load and check the verdict rules; raises BadInputError naming what is wrong."""
    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise BadInputError(f"cannot read verdict rules {path}: {str(exc).splitlines()[0]}") from None
    if not isinstance(doc, dict) or doc.get("schema") != RULES_SCHEMA:
        raise BadInputError(f"{path}: expected a mapping with schema: {RULES_SCHEMA}")
    signals = []
    for i, raw in enumerate(doc.get("signals") or []):
        where = f"{path}: signal #{i + 1}"
        if raw.get("reading") not in READINGS or raw.get("strength") not in STRENGTHS or not raw.get("id"):
            raise BadInputError(f"{where}: needs an id, a reading from {READINGS} and a strength from {STRENGTHS}")
        signals.append(SignalRule(id=str(raw["id"]), reading=raw["reading"], min=float(raw.get("min", 1)),
                                  strength=raw["strength"], says=str(raw.get("says") or raw["id"]),
                                  unless=tuple(raw.get("unless") or ()),
                                  below=float(raw["below"]) if raw.get("below") is not None else None))
    logs = doc.get("logs") or {}
    conf = doc.get("confidence") or {}
    crash = doc.get("crash_loop") or {}
    return Rules(
        signals=tuple(signals),
        logs=LogRules(counters=_compile(logs.get("counters"), f"{path}: logs.counters"),
                      time_like=_compile(logs.get("time_like"), f"{path}: logs.time_like"),
                      ignore=_compile(logs.get("ignore"), f"{path}: logs.ignore"),
                      recent_s=float(logs.get("recent_s", 10.0))),
        families={str(k): str(v) for k, v in (conf.get("families") or {}).items()},
        confidence={str(k): float(v) for k, v in conf.items() if k != "families"},
        crash_loop=CrashLoopRules(
            min_restarts=int(crash.get("min_restarts", 2)),
            min_failed_attempts=int(crash.get("min_failed_attempts", 2)),
            death_error_types=tuple(str(t) for t in crash.get("death_error_types") or ()),
            death_reasons=_compile(crash.get("death_reasons"), f"{path}: crash_loop.death_reasons"),
            min_repeated_tracebacks=int(crash.get("min_repeated_tracebacks", 3))),
        inconclusive_when_silent={str(k): str(v) for k, v in (doc.get("inconclusive_when_silent") or {}).items()},
        proven_stuck=frozenset(str(p) for p in doc.get("proven_stuck") or ()),
        own_work_no_release=frozenset(str(p) for p in doc.get("own_work_no_release") or ()),
        before_window_signals=frozenset(str(p) for p in doc.get("before_window_signals") or ()),
        proven_without_task_state=frozenset(str(p) for p in doc.get("proven_without_task_state") or ()),
        busy=_busy_rules(doc.get("busy") or {}, f"{path}: busy"),
    )


def _busy_rules(raw: Any, where: str) -> BusyRules:
    if not isinstance(raw, dict):
        raise BadInputError(f"{where}: expected a mapping")
    known = set(BusyRules.__dataclass_fields__)
    if set(raw) - known:
        raise BadInputError(f"{where}: unknown key(s) {sorted(set(raw) - known)}; known: {sorted(known)}")
    d = BusyRules()
    try:
        return BusyRules(spin_by_state_samples=int(raw.get("spin_by_state_samples", d.spin_by_state_samples)),
                         spin_by_state_span_s=float(raw.get("spin_by_state_span_s", d.spin_by_state_span_s)),
                         extra_samples=int(raw.get("extra_samples", d.extra_samples)),
                         young_wait_s=float(raw.get("young_wait_s", d.young_wait_s)),
                         paced_patterns=tuple(str(x) for x in raw.get("paced_patterns") or ()))
    except (TypeError, ValueError) as exc:
        raise BadInputError(f"{where}: {exc}") from None


@lru_cache(maxsize=1)
def rules() -> Rules:
    """The shipped rules (loaded once)."""
    return load_rules()


@dataclass
class Finding:
    signal: str
    strength: str
    family: str
    value: float
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"signal": self.signal, "strength": self.strength, "value": self.value, "text": self.text}


@dataclass
class ProcessProgress:
    """What one process did in the window: its findings, or why it could not be read."""

    node_id: str | None
    pid: int | None
    name: str
    read: bool  # progress readings were taken on its node
    window_s: float | None = None
    findings: list[Finding] = field(default_factory=list)
    silent: list[str] = field(default_factory=list)  # families read and silent
    errors: list[str] = field(default_factory=list)
    readings: dict[str, float] = field(default_factory=dict)  # every reading by name, as read

    def strongest(self) -> str | None:
        for level in ("progress", "activity"):
            if any(f.strength == level for f in self.findings):
                return level
        return None

    def deciding(self, level: str) -> list[Finding]:
        return [f for f in self.findings if f.strength == level]

    def to_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "pid": self.pid, "name": self.name, "read": self.read,
                "window_s": self.window_s, "findings": [f.to_dict() for f in self.findings],
                "silent": self.silent, "errors": self.errors, "readings": self.readings}


# ------------------------------------------------------------------------------- log lines
def _mask_times(line: str, lr: LogRules) -> str:
    for pattern in lr.time_like:
        line = pattern.sub("<t>", line)
    return line


def _shape(masked: str) -> str:
    return re.sub(r"\d+", "#", masked)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _job_lines(lines: list[str], lr: LogRules) -> list[str]:
    """The job's own lines: terminal escapes dropped, Ray's own lines left out."""
    clean = [_ANSI.sub("", ln) for ln in lines]
    return [ln for ln in clean if ln.strip() and not any(p.search(ln) for p in lr.ignore)]


def _numbers(masked: str) -> list[str]:
    return re.findall(r"\d+", masked)


def _counters(masked: str, lr: LogRules) -> list[str]:
    return [m.group(0) for p in lr.counters for m in p.finditer(masked)]


def log_readings(logs: list[dict[str, Any]], lr: LogRules) -> dict[str, tuple[float, str]]:
    """From a process's log windows: advancing counters, novel lines, a fresh advancing tail."""
    advancing: list[str] = []
    novel: list[str] = []
    recent: tuple[float, str] | None = None
    for log in logs:
        tail, new = _job_lines(log.get("tail") or [], lr), _job_lines(log.get("new") or [], lr)
        seen: dict[str, tuple[str, str]] = {}  # shape -> (masked, original) of its last line
        exact: set[str] = set()
        for line in tail:
            masked = _mask_times(line, lr)
            exact.add(masked)
            if _counters(masked, lr):
                seen[_shape(masked)] = (masked, line)
        for line in new:
            masked = _mask_times(line, lr)
            shape, counters = _shape(masked), _counters(masked, lr)
            if counters and shape in seen and _counters(seen[shape][0], lr) != counters:
                advancing.append(f"{seen[shape][1].strip()[:120]} → {line.strip()[:120]}")
            elif masked not in exact:
                novel.append(line.strip()[:120])
            exact.add(masked)
            if counters:
                seen[shape] = (masked, line)
        age = log.get("age_s")
        if not new and age is not None and float(age) <= lr.recent_s and len(tail) >= 2:
            # Fresh, and the last line repeats an earlier line of the tail (other lines may come
            # between) with other numbers: a loop still counting (a retry or back-off "attempt
            # N" as much as a "step N"). Activity, not progress: it never proves work, it only
            # keeps a silent window from reading as a hang.
            last = _mask_times(tail[-1], lr)
            before = next((ln for ln in reversed(tail[:-1]) if _shape(_mask_times(ln, lr)) == _shape(last)), None)
            if before is not None and _numbers(last) != _numbers(_mask_times(before, lr)):
                recent = (float(age), f"{before.strip()[:120]} → {tail[-1].strip()[:120]}")
    out: dict[str, tuple[float, str]] = {}
    if advancing:
        out["advancing_counters"] = (float(len(advancing)), advancing[-1])
    if novel:
        out["novel_log_lines"] = (float(len(novel)), novel[-1])
    if recent is not None:
        out["recent_counter"] = recent
    return out


# ------------------------------------------------------------------------------- stacks
def loop_moved(samples: list[Process]) -> str | None:
    """Where a looping thread moved between samples ("" if it did not; None with one sample).

    A thread whose samples share their outer frames but differ in a caller's line: the loop
    went round doing other work between samples (a poll that only sleeps changes, at most, the
    line of its innermost frame: the loop header or the sleep)."""
    if len(samples) < 2:
        return None  # not read
    by_thread: dict[Any, list[list[tuple[str, int | None]]]] = {}
    for proc in samples:
        for thread in proc.threads:
            if all(is_library(f) for f in thread.frames if not f.native):
                continue  # Ray's and the runtime's own threads move on their own
            frames = [(f.function, f.line) for f in reversed(thread.frames) if not f.native]  # outermost first
            by_thread.setdefault(thread.os_thread_id or thread.thread_id or thread.name, []).append(frames)
    for stacks in by_thread.values():
        for a, b in zip(stacks, stacks[1:], strict=False):
            depth = min(len(a), len(b)) - 1  # the innermost frame of the shorter stack is left out
            for (fa, la), (fb, lb) in zip(a[:depth], b[:depth], strict=True):
                if fa != fb:
                    break
                if la != lb:
                    return f"{fa} at line {la} then {lb}"
    return ""  # read: it did not move


# ------------------------------------------------------------------------------- assessment
def _amount(value: float) -> str:
    if value >= 1 << 20:
        return f"{value / (1 << 20):.1f} MiB"
    if value < 1024:
        return f"{value:.0f} bytes"
    return f"{value / 1024:.0f} KiB"


def log_text_bytes(log: dict[str, Any]) -> int:
    """A log window's growth that is text: what its lines were counted from."""
    return max(0, int(log.get("bytes") or 0) - int(log.get("not_text_bytes") or 0))


def output_growth(window: dict[str, Any]) -> tuple[int, str]:
    """Bytes the process wrote into its stdout/stderr that are no log: data files behind them
    (`outputs`, never read) and bytes in a log that are not text; with the files' names."""
    grown = [(int(o.get("bytes") or 0), str(o.get("name") or "")) for o in window.get("outputs") or []]
    grown += [(int(log.get("not_text_bytes") or 0), str(log.get("name") or "")) for log in window.get("logs") or []]
    grown = [(n, name) for n, name in grown if n > 0]
    return sum(n for n, _ in grown), ", ".join(dict.fromkeys(name for _, name in grown))


def readings(window: dict[str, Any] | None, cpu_percent: float | None, moved: str | None,
             lr: LogRules) -> dict[str, tuple[float, str]]:
    """Every reading by name (see READINGS): (value, example text)."""
    found: dict[str, tuple[float, str]] = {}
    if window is not None:
        io = window.get("io") or {}
        logs = window.get("logs") or []
        log_bytes = sum(log_text_bytes(log) for log in logs)
        # Its own log lines reach the disk too, a page at a time: they are counted as lines.
        log_pages = sum(-(-log_text_bytes(log) // PAGE) * PAGE + PAGE for log in logs if log_text_bytes(log))
        for key in ("read_bytes", "rchar"):
            if key in io:
                found[key] = (float(io[key]), "")
        if "write_bytes" in io:
            found["write_bytes_beyond_logs"] = (float(max(0, int(io["write_bytes"]) - log_pages)), "")
        if "wchar" in io:
            found["wchar_beyond_logs"] = (float(max(0, int(io["wchar"]) - log_bytes)), "")
        ctxt = window.get("ctxt") or {}
        if "voluntary_ctxt_switches" in ctxt:
            found["voluntary_ctxt_switches"] = (float(ctxt["voluntary_ctxt_switches"]), "")
        if window.get("logs"):
            found.update({"advancing_counters": (0.0, ""), "novel_log_lines": (0.0, ""), "recent_counter": (0.0, "")})
        if window.get("outputs") or any(log.get("not_text_bytes") for log in logs):
            written, names = output_growth(window)
            found["output_file_bytes"] = (float(written), names[:120])
        found.update(log_readings(window.get("logs") or [], lr))
    if cpu_percent is not None:
        found["cpu_percent"] = (float(cpu_percent), "")
    if moved is not None:
        found["loop_moved"] = (1.0 if moved else 0.0, moved)
    return found


def assess(node_id: str | None, pid: int | None, name: str, window: dict[str, Any] | None,
           cpu_percent: float | None, pattern: str | None, moved: str | None,
           r: Rules | None = None) -> ProcessProgress:
    """One process's findings under the rules."""
    r = r or rules()
    errors = list((window or {}).get("errors") or [])
    if window is not None and window.get("exited"):
        window = None
    result = ProcessProgress(node_id=node_id, pid=pid, name=name, read=window is not None,
                             window_s=(window or {}).get("window_s"), errors=errors)
    values = readings(window, cpu_percent, moved, r.logs)
    result.readings = {k: v for k, (v, _) in sorted(values.items())}
    if window is not None:
        logs = window.get("logs") or []
        result.readings["log_bytes"] = float(sum(log_text_bytes(log) for log in logs))
        result.readings["log_lines"] = float(sum(int(log.get("lines") or 0) for log in logs))
    families_read: set[str] = set()
    families_moved: set[str] = set()
    for rule in r.signals:
        if rule.reading not in values:
            continue
        family = r.families.get(rule.id, "")
        if family:
            families_read.add(family)
        value, example = values[rule.reading]
        if value < rule.min or (rule.below is not None and value >= rule.below) \
                or (pattern is not None and (pattern in rule.unless or pattern in r.own_work_no_release)):
            continue
        text = rule.says.format(value=f"{value:g}", amount=_amount(value), example=example)
        result.findings.append(Finding(rule.id, rule.strength, family, value, text))
        if rule.strength != "info" and family:
            families_moved.add(family)
    result.silent = sorted(families_read - families_moved)
    return result


def summary_text(found: list[Finding]) -> str:
    """'wrote 512 KiB to disk, logged a progress counter that advanced (...)': one finding per
    family (disk bytes and write-call bytes are the same writes)."""
    shown: dict[str, Finding] = {}
    for f in found:
        shown.setdefault(f.family or f.signal, f)
    return ", ".join(f.text for f in shown.values())


def progress_confidence(signals: list[ProcessProgress], r: Rules | None = None) -> float | None:
    """How sure a `no-hang` from progress readings is: more independent families that show work
    (io, log), more sure. None when no process showed progress."""
    r = r or rules()
    families = {f.family or f.signal for s in signals for f in s.deciding("progress")}
    if not families:
        return None
    conf = r.confidence
    return round(min(conf.get("progress_max", 0.95),
                     conf.get("progress_base", 0.7) + conf.get("progress_bonus", 0.1) * (len(families) - 1)), 2)
