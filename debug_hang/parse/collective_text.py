"""Collective facts written in text, not stacks: what a message says each rank was running.

- PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL "Detected mismatch between collectives on ranks"
  message, as one fact per rank (op, sequence number, shapes, dtypes), wherever it sits: on its
  own line, as the exception line of a RuntimeError traceback, behind a log prefix.

Each fact lands in `Process.collective` of the process of that rank when the input has one, else
on a process with only the rank (no stack is invented).
"""

from __future__ import annotations

import re
from typing import Any

from debug_hang.model import Process

_MISMATCH = "Detected mismatch between collectives on ranks"
_RANK_RUNNING = re.compile(r"Rank (?P<rank>\d{1,7}) is running (?:inconsistent )?collective: ")
_FP_FIELDS = {
    "sequence": re.compile(r"SequenceNumber=(\d{1,20})"),
    "op": re.compile(r"OpType=(\w{1,40})"),
    "shapes": re.compile(r"TensorShape=\[([^\]]{0,400})\]"),
    "dtypes": re.compile(r"TensorDtypes=(\w{1,40})"),
}


def collective_facts(line: str, lineno: int) -> list[dict[str, Any]]:
    """One fact per rank named in a TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch message:
    {"rank", "op", "sequence", "shapes", "dtypes", "reported_by", "line", "source"}."""
    at = line.find(_MISMATCH)
    if at < 0:
        return []
    starts = list(_RANK_RUNNING.finditer(line, at))
    facts: list[dict[str, Any]] = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
        differ = line.find("Collectives differ", match.end(), end)
        end = differ if differ >= 0 else end
        chunk = line[match.end():end]
        fact: dict[str, Any] = {"rank": int(match.group("rank"))}
        for key, regex in _FP_FIELDS.items():
            found = regex.search(chunk)
            if found is not None:
                fact[key] = int(found.group(1)) if key == "sequence" else found.group(1)
        fact["reported_by"] = int(starts[0].group("rank"))
        fact["line"] = lineno
        fact["source"] = "TORCH_DISTRIBUTED_DEBUG=DETAIL collective mismatch message"
        facts.append(fact)
    return facts


def attach_collectives(processes: list[Process], facts: list[dict[str, Any]],
                       warnings: list[str]) -> None:
    """Give each rank named by a collective-mismatch message its fact: on the input's process of
    that rank (first one), else on a new process with only the rank known (no thread)."""
    by_rank: dict[int, dict[str, Any]] = {}
    for fact in facts:
        by_rank.setdefault(int(fact["rank"]), fact)
    added = []
    for rank, fact in sorted(by_rank.items()):
        proc = next((p for p in processes if p.rank == rank), None)
        if proc is None:
            proc = Process(rank=rank, source="torch-mismatch")
            processes.append(proc)
            added.append(rank)
        proc.collective = {k: v for k, v in fact.items() if k != "rank"}
    said = ", ".join(f"rank {r} {f.get('op', '?')}" for r, f in sorted(by_rank.items()))
    seqs = sorted({str(f.get("sequence")) for f in by_rank.values()})
    warnings.append(f"read a TORCH_DISTRIBUTED_DEBUG collective mismatch ({said}; sequence number "
                    f"{'/'.join(seqs)}) as per-rank facts (Process.collective)"
                    + (f"; rank(s) {', '.join(map(str, added))} have no stack in the input: "
                       "processes with only the rank and the fact" if added else ""))
