"""A poll whose wait ends at a recorded time: a lease's expiry, a claim's deadline (pure).

What an application keeps with a TTL - `leases[key] = (owner, time.time() + ttl)` - frees itself
once its expiry passes, whether its holder is alive or not. A poll whose loop holds that time - the
answer of the call it retries (`granted, holder, expires_at = ray.get(table.try_acquire.remote(...))`)
or a time its exit test compares with the clock (`if time.time() > deadline: raise`) - waits for a
release that is scheduled: while that time is ahead of the moment it was read, the wait ends by
itself, and the poll is no hang. It stays one when the time passed more than PAST_GRACE_S before
the reading and the poll still fails (the expiry is not honoured), or when it moved forward
between readings (someone renews the claim): then this rule says nothing.

Which local is such a time is read from the loop's source and the local's value, never its name:
a number that is a wall-clock time (epoch seconds, or milli-, micro-, nanoseconds) within
MAX_AHEAD_S of the reading, bound by a call of the loop in the statement that binds what its exit
tests read, or compared with a clock call in a test that ends the loop. A monotonic clock's value
(seconds since boot) is not comparable from here and is not read.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass
from typing import Any

from debug_hang.analyse.busy import (
    CLOCKS,
    BusyWork,
    _call_name,
    _dotted,
    _guard_tests,
    _is_pure,
    _parsed_loop,
    _reads,
    _targets,
    _thread_key,
)
from debug_hang.model import Collection, Frame, Process, ProcessRef

PAST_GRACE_S = 10.0  # an expiry passed by less than this may still be about to clear (a poll round, clock skew)
MAX_AHEAD_S = 7 * 86400.0  # a number this close to the reading's wall-clock time is a time
RENEWED_S = 0.5  # an expiry that moved forward by more than this between readings was renewed
_SCALES = (1.0, 1e3, 1e6, 1e9)  # seconds, milli-, micro-, nanoseconds since the epoch
ANSWER = "the answer of the call its loop retries"
CLOCK_TEST = "what its loop's exit test compares with the clock"


@dataclass(frozen=True)
class Expiry:
    """A wall-clock time a poll's loop holds, at which its wait ends by itself."""

    name: str  # the loop's local
    at: float  # epoch seconds
    read_at: float  # when it was read (the sample's time)
    how: str  # ANSWER or CLOCK_TEST
    readings: int = 1
    renewed: str = ""  # "1796418253.6 → 1796418262.1": it moved forward between readings

    @property
    def ahead_s(self) -> float:
        return self.at - self.read_at

    @property
    def scheduled(self) -> bool:
        """The wait ends by itself: the time is ahead (or just passed) and nobody moves it on."""
        return not self.renewed and self.ahead_s > -PAST_GRACE_S

    def when(self) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.at))
        ahead = self.ahead_s
        return f"{stamp} (in {ahead:.0f} s)" if ahead >= 0 else f"{stamp} ({-ahead:.0f} s ago)"

    def text(self) -> str:
        seen = f"read in {self.readings} sample(s)" if self.readings > 1 else "read once"
        if self.renewed:
            return f"`{self.name}`, {self.how}, moved forward between samples ({self.renewed}): the claim is renewed"
        return f"`{self.name}`, {self.how}, is {self.when()}, {seen}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "at": self.at, "read_at": self.read_at, "ahead_s": round(self.ahead_s, 1),
                "how": self.how, "readings": self.readings, "renewed": self.renewed, "scheduled": self.scheduled}


def _timed_names(loop: ast.While | ast.For | ast.AsyncFor) -> dict[str, str]:
    """The loop's locals that may hold the time its wait ends at, and how the loop gets each."""
    tests = ([loop.test] if isinstance(loop, ast.While) else []) + _guard_tests(loop.body)
    tested = set().union(*(_reads(t) for t in tests)) if tests else set()
    out: dict[str, str] = {}
    for node in ast.walk(loop):
        if not isinstance(node, (ast.Assign, ast.NamedExpr)):
            continue
        targets = [t for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                   for t in _targets(target)]
        called = any(isinstance(n, ast.Call) and not _is_pure(_call_name(n))
                     and _call_name(n).split(".")[-1] not in CLOCKS for n in ast.walk(node.value))
        if called and set(targets) & tested:
            for t in targets:
                out.setdefault(t, ANSWER)  # bound with what the exit tests read, by the call it retries
    for test in tests:
        for cmp in ast.walk(test):
            operands = [cmp.left, *cmp.comparators] if isinstance(cmp, ast.Compare) else []
            if any(isinstance(n, ast.Call) and _call_name(n).split(".")[-1] in CLOCKS for n in operands):
                # `time.time() > deadline`: the time itself compared (not `time.time() - start > timeout`)
                for n in operands:
                    if isinstance(n, (ast.Name, ast.Attribute)) and (name := _dotted(n)):
                        out.setdefault(name, CLOCK_TEST)
    return out


def _wall_time(value: object, read_at: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    for scale in _SCALES:
        seconds = float(value) / scale
        if abs(seconds - read_at) <= MAX_AHEAD_S:
            return seconds
    return None


def _readings(frame: Frame, read_at: float) -> dict[str, tuple[float, str]]:
    parsed = _parsed_loop(frame)
    facts = frame.facts if isinstance(frame.facts, dict) else {}
    if parsed is None or parsed[3] is None or not facts or not parsed[3].body:
        return {}
    loop = parsed[3].body[0]
    if not isinstance(loop, (ast.While, ast.For, ast.AsyncFor)):
        return {}
    out = {}
    for name, how in _timed_names(loop).items():
        at = _wall_time(facts.get(name), read_at)
        if at is not None:
            out[name] = (at, how)
    return out


def recorded_expiry(work: BusyWork, samples: list[Process], info: dict[str, Any]) -> Expiry | None:
    """The time at which the poll `work` reads stops waiting by itself, from its loop's frame in
    each sample (None: its loop holds no such time, or the samples' times are unknown)."""
    times = [t for t in info.get("sampled_at") or [] if isinstance(t, (int, float)) and not isinstance(t, bool)]
    seen: dict[str, list[tuple[float, float, str]]] = {}
    for proc in sorted(samples, key=lambda p: p.sample):
        if proc.sample >= len(times):
            continue
        read_at = float(times[proc.sample])
        thread = next((t for t in proc.threads if str(t.name or _thread_key(t)) == work.thread), None)
        frame = next((f for f in (thread.frames if thread else []) if not f.native and f.function == work.function
                      and f.short_file == work.file), None)
        for name, (at, how) in (_readings(frame, read_at) if frame is not None else {}).items():
            seen.setdefault(name, []).append((at, read_at, how))
    if not seen:
        return None
    name = max(seen, key=lambda n: (seen[n][-1][2] == ANSWER, seen[n][-1][0]))
    values = seen[name]
    at, read_at, how = values[-1]
    moved = [(a, b) for (a, _, _), (b, _, _) in zip(values, values[1:], strict=False) if b - a > RENEWED_S]
    renewed = f"{moved[0][0]:.1f} → {moved[-1][1]:.1f}" if moved else ""
    return Expiry(name=name, at=at, read_at=read_at, how=how, readings=len(values), renewed=renewed)


def attach_expiries(busy: list[BusyWork], collection: Collection) -> None:
    """Each sleeping loop's recorded expiry (BusyWork.expiry), read from its samples; an expiry
    renewed between samples is no advance of the loop."""
    samples: dict[ProcessRef, list[Process]] = {}
    for proc in collection.processes:
        samples.setdefault(proc.ref, []).append(proc)
    for work in busy:
        if not work.sleeping:
            continue
        expiry = work.expiry = recorded_expiry(work, samples.get(work.ref, []), collection.info.get(work.ref, {}))
        if expiry is not None and expiry.renewed:
            # A claim renewed between readings is its holder's doing, not the poll moving on: its
            # answer changed, what it waits for did not.
            renewed = tuple(a for a in work.advanced if a.split(" ", 1)[0] == expiry.name)
            work.advanced = tuple(a for a in work.advanced if a not in renewed)
            work.ignored = work.ignored + tuple(f"{a} (renewed)" for a in renewed)


def scheduled_release(busy: list[BusyWork], ref: ProcessRef) -> tuple[BusyWork, Expiry] | None:
    """The poll of process `ref` whose wait ends by itself at a recorded time (None: none)."""
    for work in busy:
        if work.ref == ref and work.expiry is not None and work.expiry.scheduled:
            return work, work.expiry
    return None
