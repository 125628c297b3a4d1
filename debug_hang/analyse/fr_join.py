"""Flight Recorder facts joined with the wait-for graph: evidence on rank nodes and collective edges.

The rank that never entered the pending collective (or issued a different op there, or left no
dump) is named on its graph node and on the collective edges that point at it; the top root
cause says whether the stacks and the Flight Recorder name the same ranks, and says so plainly
when they do not. Pure: reads the graph and the analysis, changes only evidence text.
"""

from __future__ import annotations

from debug_hang.analyse.flight_recorder import (
    DESYNC,
    NEVER_ENTERED,
    NO_DUMP,
    FRAnalysis,
    GroupFinding,
    describe,
    ranks_text,
)
from debug_hang.analyse.graph import WaitGraph
from debug_hang.analyse.rootcause import RootCause

PREFIX = "Flight Recorder: "


def _rank_keys(graph: WaitGraph) -> dict[int, list[str]]:
    keys: dict[int, list[str]] = {}
    for key, node in graph.nodes.items():
        if node.rank is not None and node.kind != "task":
            keys.setdefault(node.rank, []).append(key)
    return keys


def culprit_text(g: GroupFinding, rank: int) -> str:
    """What the recorder says about one culprit rank of a group."""
    where = f"collective #{g.pending_seq} ({g.pending_op()}) of {g.label}"
    if g.kind == NEVER_ENTERED:
        return f"{PREFIX}rank {rank} never entered {where}; its last: {describe(g.ranks[rank].last, g.ranks[rank].last_enqueued)}"
    if g.kind == DESYNC:
        others = ", ".join(f"rank {r}: {op}" for r, op in sorted(g.desync_ops.items()) if r != rank)
        return (f"{PREFIX}rank {rank} issued {g.desync_ops.get(rank, '?')} as collective #{g.desync_seq} of {g.label} "
                f"where the others issued something else ({others})")
    if g.kind == NO_DUMP:
        return f"{PREFIX}no dump from rank {rank}; rank(s) {ranks_text(g.entered)} wait in {where}"
    return f"{PREFIX}{g.summary()}"


def attach(graph: WaitGraph, causes: list[RootCause], fr: FRAnalysis) -> list[str]:
    """Add Flight Recorder evidence to graph nodes, collective edges and the top cause; return notes."""
    notes: list[str] = []
    by_rank = _rank_keys(graph)
    for g in fr.hung_groups():
        culprits = set(g.culprits)
        for rank in g.culprits:
            for key in by_rank.get(rank, []):
                graph.nodes[key].evidence.append(culprit_text(g, rank))
        waiting_text = f"{PREFIX}waits in collective #{g.pending_seq} ({g.pending_op()}) of {g.label}"
        for rank in g.entered:
            if rank not in culprits:
                for key in by_rank.get(rank, []):
                    graph.nodes[key].evidence.append(waiting_text)
        for edge in graph.edges:
            src, dst = graph.nodes.get(edge.src), graph.nodes.get(edge.dst)
            if src is None or dst is None or src.rank is None or dst.rank not in culprits or src.rank in culprits:
                continue
            note = f"[FR: {g.label} #{g.pending_seq}, rank {dst.rank} {_verb(g)}]"
            if note not in edge.evidence:
                edge.evidence = f"{edge.evidence} {note}"
    notes.append(agreement(causes, fr))
    if causes:
        first = next((g for g in fr.hung_groups() if g.culprits), None)
        lines = [notes[-1]] + ([PREFIX + first.summary()] if first is not None else [])
        causes[0].evidence[:0] = lines  # first: the report shows a bounded number of evidence lines
    return notes


def _verb(g: GroupFinding) -> str:
    return {NEVER_ENTERED: "never entered it", DESYNC: "issued a different op", NO_DUMP: "left no dump"}.get(g.kind, "")


def agreement(causes: list[RootCause], fr: FRAnalysis) -> str:
    """One line: do the stacks' culprit ranks and the recorder's agree?"""
    fr_ranks = fr.culprits()
    stack_ranks = sorted({c.rank for c in causes[0].culprits if c.rank is not None}) if causes else []
    first = next((g for g in fr.hung_groups() if g.culprits), None)
    where = f" ({first.label}, collective #{first.pending_seq})" if first else ""
    if not fr.hung_groups():
        return (f"{PREFIX}every collective in the dumps of rank(s) {ranks_text(fr.ranks_dumped)} completed: the "
                "recorder sees no collective hang" + (" — the stacks' verdict does not rest on a collective" if
                                                      not stack_ranks else f", yet the stacks name rank(s) {ranks_text(stack_ranks)}"
                                                      " (are the dumps older than the hang?)"))
    if not fr_ranks:
        return f"{PREFIX}every member entered the pending collective and none finished it{where}: no rank to blame from the dumps"
    if not stack_ranks:
        return f"{PREFIX}names rank(s) {ranks_text(fr_ranks)}{where}; the stacks single out no rank"
    if set(fr_ranks) == set(stack_ranks):
        return f"{PREFIX}agrees with the stacks: rank(s) {ranks_text(fr_ranks)}{where}"
    return (f"{PREFIX}DISAGREES with the stacks: the stacks name rank(s) {ranks_text(stack_ranks)}, the recorder names "
            f"rank(s) {ranks_text(fr_ranks)}{where}. Check the dumps' age (a dump taken before the hang set in shows "
            "an earlier state) and whether every rank's dump was found")
