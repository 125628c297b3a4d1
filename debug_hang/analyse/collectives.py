"""Collective mismatches that PyTorch itself reported (TORCH_DISTRIBUTED_DEBUG=DETAIL).

The parser keeps what the "Detected mismatch between collectives on ranks" message says about each
rank in `Process.collective` (op, sequence number, shapes, dtypes). Ranks whose collective at one
sequence number differs from another rank's are in a collective mismatch: that is the root cause,
named by PyTorch, not inferred from stacks.
"""

from __future__ import annotations

from typing import Any

from debug_hang.model import Process

_COMPARED = ("op", "shapes", "dtypes")


def mismatches(processes: list[Process]) -> dict[int, str]:
    """rank → one line saying how its collective differs from the other ranks' (same sequence
    number, or all reported ranks when the message gave none)."""
    by_seq: dict[Any, dict[int, dict[str, Any]]] = {}
    for proc in processes:
        if proc.rank is not None and proc.collective:
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
