"""When the answer depends on more samples, and of which processes (pure).

Two samples a second apart decide most hangs: a lock cycle, a dead producer, a request no node can
hold. They cannot tell a loop that never ends from a long step, a poll that moved once from one that
works, or a wait that began a moment ago from one that never ends. For those the diagnosis takes
more samples of the processes it turns on, within its deadline (pipeline.py), instead of asking
the user to run it again; `plan` says which and why, `summary` what was taken. How many more:
`busy.extra_samples` of references/verdict_rules.yaml (`extra_samples()`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.progress import rules
from debug_hang.model import Collection, ProcessRef

MAX_EXTRA_PROCESSES = 16  # processes sampled again at most (the ones the verdict turns on)


@dataclass
class SamplingPlan:
    """More samples the answer depends on: of which processes, and why (one reason each)."""

    refs: list[ProcessRef] = field(default_factory=list)
    why: list[str] = field(default_factory=list)

    def add(self, ref: ProcessRef | None, why: str) -> None:
        if ref is None or ref.pid is None or ref in self.refs or len(self.refs) >= MAX_EXTRA_PROCESSES:
            return
        self.refs.append(ref)
        self.why.append(why)


def plan(diag: Diagnosis, now_s: float) -> SamplingPlan:
    """What to sample again for `diag` (made from the first round), `now_s` being when its state
    was read. Empty when the answer does not depend on more samples."""
    out = SamplingPlan()
    if diag.verdict == "no-hang" or not diag.causes:
        return out
    top = diag.causes[0]
    culprit = top.culprits[0]
    busy = {w.ref: w for w in diag.busy}
    for cause in diag.causes:  # every busy culprit: once the top one is set aside, the next decides
        first = cause.culprits[0]
        work = busy.get(first.ref)
        if cause.cycle or work is None and first.state != "busy":
            continue
        if work is None or (not work.sleeping and work.state in ("no-spin", "undecided")):
            out.add(first.ref, f"{first.label()} is busy and {work.seen() if work else 'its samples'} do not show "
                               "whether it advances")
        elif work.sleeping and work.state == "no-spin":
            out.add(first.ref, f"{first.label()} sleeps in a loop that is no poll: more samples show whether it moves on")
    work = busy.get(culprit.ref)
    culprit_refs = {c.ref for c in top.culprits}
    for signal in diag.signals:
        ref = ProcessRef(signal.node_id, signal.pid)
        if diag.verdict == "inconclusive" and ref in culprit_refs and signal.strongest() == "activity":
            moved = ", ".join(f.signal for f in signal.deciding("activity"))
            out.add(ref, f"{signal.name} moved between samples ({moved}): more samples tell work from a poll")
    if diag.verdict != "hang" or top.cycle:
        return out
    r = rules()
    if top.pattern in r.proven_stuck or top.pattern in r.proven_without_task_state:
        return out
    # A hang on a culprit whose own wait says nothing (an unrecognised wait; a busy thread seen
    # to spin by its state alone) rests on its silence: a longer window, and a young wait older.
    spin = busy.get(culprit.ref)
    if culprit.state == "unknown" or (spin is not None and spin.state == "spin" and not spin.proven_by_source):
        young = _young_call(diag, now_s)
        out.add(culprit.ref, young or f"{culprit.label()}'s only evidence is its silence in a {_window(diag)} window")
    return out


def _window(diag: Diagnosis) -> str:
    span = summary(diag.collection)["span_s"]
    return f"{span:.1f}s" if span else "short"


def _young_call(diag: Diagnosis, now_s: float) -> str:
    """The youngest running call on the top chain, when it began less than `young_wait_s` ago."""
    top = diag.causes[0]
    tasks = {t.task_id: t for t in diag.rows.tasks}
    keys = set(top.victims) | {c.key for c in top.culprits}
    starts = []
    for key in keys:
        node = diag.graph.nodes.get(key)
        task = tasks.get(node.task_id or "") if node is not None else None
        if task is not None and task.state == "RUNNING" and task.start_time_ms:
            starts.append((task.start_time_ms / 1000.0, task.name))
    if not starts:
        return ""
    started, name = max(starts)
    age = now_s - started
    if age >= rules().busy.young_wait_s:
        return ""
    return f"the wait is young: {name} started {max(age, 0.0):.1f}s before the stacks were read"


def summary(collection: Collection, why: list[str] | None = None, rounds: int = 1,
            readings: list[str] | None = None) -> dict[str, Any]:
    """How the stacks were sampled: the most samples of one process, over how long, in how many
    rounds, and why more were taken; `readings`: earlier readings of the job, found still starting."""
    per: dict[ProcessRef, int] = {}
    for proc in collection.processes:
        per[proc.ref] = per.get(proc.ref, 0) + 1
    spans = []
    for info in collection.info.values():
        times = [float(t) for t in info.get("sampled_at") or [] if isinstance(t, (int, float))]
        if len(times) >= 2:
            spans.append(max(times) - min(times))
    out = {"samples": max(per.values(), default=0), "span_s": round(max(spans), 1) if spans else None,
           "rounds": rounds, "why": list(why or [])}
    if readings:
        out["readings"] = list(readings)
    return out


def extra_samples() -> int:
    """Samples of the second round (with the first round's two, about five seconds of samples)."""
    return max(1, rules().busy.extra_samples)
