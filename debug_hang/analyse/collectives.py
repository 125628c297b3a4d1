"""Collective mismatches that PyTorch itself reported (TORCH_DISTRIBUTED_DEBUG=DETAIL).

The parser keeps what the "Detected mismatch between collectives on ranks" message says about each
rank in `Process.collective` (op, sequence number, shapes, dtypes). Ranks whose collective at one
sequence number differs from another rank's are in a collective mismatch: that is the root cause,
named by PyTorch, not inferred from stacks.
"""

from __future__ import annotations

from typing import Any

from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.model import Process

_COMPARED = ("op", "shapes", "dtypes")


def mismatches(processes: list[Process]) -> dict[int, str]:
    """rank → one line saying how its collective differs from the other ranks' (same sequence
    number, or all reported ranks when the message gave none)."""
    by_seq: dict[Any, dict[int, dict[str, Any]]] = {}
    for proc in processes:
        if proc.rank is not None and proc.collective and "mismatch" in str(proc.collective.get("source")):
            by_seq.setdefault(proc.collective.get("sequence"), {}).setdefault(proc.rank, proc.collective)
    out: dict[int, str] = {}
    for seq, ranks in by_seq.items():
        if len(ranks) < 2:
            continue
        differ = [k for k in _COMPARED if len({str(f.get(k)) for f in ranks.values()}) > 1]
        if not differ:
            continue
        said = ", ".join(f"rank {r} {_describe(f)}" for r, f in sorted(ranks.items()))
        where = f" at collective sequence number {seq}" if seq is not None else ""
        for rank in ranks:
            out[rank] = f"ranks run different collectives{where} ({said}); differ in {', '.join(differ)}"
    return out


def _describe(fact: dict[str, Any]) -> str:
    shapes = f" [{fact['shapes']}]" if fact.get("shapes") is not None else ""
    return f"{fact.get('op', '?')}{shapes}"


# -- progress facts: NCCL watchdog, desync report, monitored_barrier --------------------------
LAGGING: PatternId = "collective-skipped"  # the rank is not in the collective its peers wait in
WAITING: PatternId = "collective-wait"
# At most this share of the reporting ranks is named for never reporting: a log holding the lines
# of a few ranks only says nothing about the others.
_GAP_SHARE = 0.25


def progress_findings(processes: list[Process]) -> dict[int, tuple[PatternId, str]]:
    """rank → (pattern, reason) from the per-rank progress facts parse/collective_text reads:
    the ranks PyTorch's desync report or monitored_barrier names, the ranks whose last enqueued
    work is behind the collective the others timed out in, and the ranks that never report while
    others time out are `collective-skipped` (the culprits); the ranks that timed out waiting are
    `collective-wait`."""
    facts = {p.rank: p.collective for p in processes if p.rank is not None and p.collective
             and _is_progress(p.collective)}
    out: dict[int, tuple[PatternId, str]] = {}
    for rank, fact in sorted(facts.items()):
        if fact.get("lagging"):
            out[rank] = (LAGGING, f"{fact.get('source')} names rank {rank}: {fact['lagging']}")
    timed = {r: f for r, f in facts.items() if f.get("state") in ("timed out", "failed")}
    target = max((int(f["sequence"]) for f in timed.values() if f.get("sequence") is not None), default=None)
    enqueued = {r: int(f["last_enqueued"]) for r, f in facts.items() if f.get("last_enqueued") is not None}
    if target is None and len(enqueued) >= 2:
        target = max(enqueued.values())  # only progress lines (a dump signal): the furthest rank
    if target is not None:
        for rank, last in sorted(enqueued.items()):
            if last < target and rank not in out:
                out[rank] = (LAGGING, f"rank {rank} enqueued NCCL work up to #{last}, behind #{target} "
                                      "that its peers wait in: it never entered that collective")
        _never_reported(processes, facts, timed, target, out)
    laggards = sorted(r for r, (pattern, _) in out.items() if pattern == LAGGING)
    for rank, fact in sorted(timed.items()):
        if rank not in out:
            who = f"rank(s) {', '.join(map(str, laggards))}" if laggards else "a peer the facts do not name"
            seq = f" #{fact['sequence']}" if fact.get("sequence") is not None else ""
            out[rank] = (WAITING, f"timed out in collective{seq} ({fact.get('op', '?')}), waiting for {who}")
    return out


def _is_progress(fact: dict[str, Any]) -> bool:
    return any(k in fact for k in ("lagging", "last_enqueued", "state", "watchdog_stuck_s"))


def _never_reported(processes: list[Process], facts: dict[int, dict[str, Any]],
                    timed: dict[int, dict[str, Any]], target: int, out: dict[int, tuple[PatternId, str]]) -> None:
    """Ranks with no watchdog line while others timed out: a process of that rank in the input
    with no progress fact, or a few ranks missing between the ranks that reported."""
    if not timed or not any(f.get("sequence") is not None for f in timed.values()):
        return  # only a watchdog's own timeout says which collective the others are in
    reported = set(timed)  # ranks whose own watchdog timed out
    present = {p.rank for p in processes if p.rank is not None}
    silent = present - set(facts)
    if len(reported) >= 3:
        gaps = set(range(max(reported) + 1)) - set(facts) - present
        if gaps and len(gaps) <= max(1, int(len(reported) * _GAP_SHARE)):
            silent |= gaps
    for rank in sorted(silent):
        if rank not in out:
            out[rank] = (LAGGING, f"rank {rank} reports no watchdog timeout while ranks "
                                  f"{', '.join(map(str, sorted(timed)))} timed out in collective #{target}: "
                                  "it is not in that collective (elsewhere, or dead)")
