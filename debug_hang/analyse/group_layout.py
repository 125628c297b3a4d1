"""Ranks that built one process group with different member lists, read from their own logs (pure).

`new_group(ranks)` must be called with the same ranks on every rank; built from a per-node
setting, it is not, and every collective on it waits. Ranks often log their layout once
(`rank 0: tp=2 dp_group=[0, 2]`). Lines of one shape (numbers masked) that carry a list of ranks
are compared across ranks: when a rank lists another rank as a member and that member logged a
different list in the same line, the two built different groups. That disagreement, which ranks
built which list, is what to fix; the rank a collective happens to name is only where it showed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.graph import GNode

_LIST = re.compile(r"\[\s*\d{1,6}(?:\s*,\s*\d{1,6})*\s*\]")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MAX_LINES = 400  # of each rank's log, from its end
PATTERNS = ("collective-mismatch", "collective-wait", "collective-skipped")


@dataclass(frozen=True)
class Disagreement:
    """One group the ranks built differently: each member list, the processes that logged it, a line."""

    groups: tuple[tuple[tuple[int, ...], tuple[str, ...], str], ...]  # (members, who logged it, example line)

    def text(self) -> str:
        parts = [f"{', '.join(who)} logged `{line[:120]}`" for _m, who, line in self.groups]
        (a, _wa, _la), (b, _wb, _lb) = self.groups[0], self.groups[1]
        shared = sorted(set(a) & set(b))
        return ("the ranks built one process group with different members: " + "; ".join(parts)
                + f" ({list(a)} and {list(b)} share rank(s) {', '.join(map(str, shared))} yet differ: one group, two "
                "member lists); new_group must get the same ranks on every rank")


def _lists(text: str) -> dict[tuple[str, int], tuple[tuple[int, ...], str]]:
    """(line shape, index of the list in it) -> (the last such list, its line), over a log."""
    out: dict[tuple[str, int], tuple[tuple[int, ...], str]] = {}
    for line in text.splitlines()[-MAX_LINES:]:
        line = _ANSI.sub("", line).strip()
        found = _LIST.findall(line)
        if not found:
            continue
        shape = re.sub(r"\d+", "#", _LIST.sub("[…]", line))
        for i, item in enumerate(found):
            out[(shape, i)] = (tuple(int(n) for n in re.findall(r"\d+", item)), line)
    return out


def _is_ranks(members: tuple[int, ...], world: int) -> bool:
    """A list of ranks: strictly increasing, each below the world size (not a shape or a series)."""
    return bool(members) and all(a < b for a, b in zip(members, members[1:], strict=False)) \
        and 0 <= members[0] and members[-1] < world


def disagreement(logs: dict[str, str]) -> Disagreement | None:
    """From each rank's log text (who -> text; the world size is how many there are): the first
    line, logged by every one of them in one shape, whose member lists overlap and differ. Ranks
    that each log their own group log a partition (equal or disjoint lists: [0, 2] and [1, 3]);
    two lists sharing a rank but not equal are one group built with two member lists."""
    world = len(logs)
    read = {who: {k: v for k, v in _lists(text).items() if _is_ranks(v[0], world)} for who, text in logs.items()}
    keys = sorted({k for found in read.values() for k in found})
    for key in keys:
        values = {who: found[key] for who, found in read.items() if key in found}
        if len(values) < len(logs):
            continue  # not logged by every rank: not one layout line
        by_list: dict[tuple[int, ...], list[str]] = {}
        for who, (members, _line) in sorted(values.items()):
            by_list.setdefault(members, []).append(who)
        lists = list(by_list)
        if any(set(a) & set(b) for i, a in enumerate(lists) for b in lists[i + 1:]):
            first = next(a for i, a in enumerate(lists) if any(set(a) & set(b) for b in lists[i + 1:]))
            rest = [m for m in lists if m != first]
            ordered = [first, *sorted(rest, key=lambda m: not set(m) & set(first))]
            return Disagreement(tuple((m, tuple(by_list[m]), values[by_list[m][0]][1]) for m in ordered))
    return None


def name_group_disagreement(diag: Diagnosis) -> None:
    """For a collective cause whose ranks' logs (read as evidence) show they built one group with
    different members: the disagreement leads its evidence and the summary, and every rank of it
    is a culprit (which side is wrong is the job's configuration, not something the logs say)."""
    ev = diag.evidence
    if ev is None or diag.verdict != "hang":
        return
    for cause in diag.causes:
        if cause.pattern not in PATTERNS:
            continue
        ranks: dict[str, GNode] = {}
        for key in [c.key for c in cause.culprits] + list(cause.victims):
            node = diag.graph.nodes.get(key)
            found = ev.per_node.get(key)
            if node is not None and (node.rank is not None or node.pattern in PATTERNS) \
                    and found is not None and found.logs.get("out"):
                ranks.setdefault(node.label(), node)
        if len(ranks) < 2:
            continue
        found_gap = disagreement({who: ev.per_node[n.key].logs.get("out", "") for who, n in ranks.items()})
        if found_gap is None:
            continue
        text = found_gap.text()
        if text not in cause.evidence:
            cause.evidence.insert(0, text)
        named = [ranks[who] for _m, group, _l in found_gap.groups for who in group]
        order = {n.key: n for n in named + cause.culprits}
        cause.culprits = list(order.values())
        if text not in diag.summary:
            diag.summary = f"{diag.summary} {text[:1].upper()}{text[1:]}."
