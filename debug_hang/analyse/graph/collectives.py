"""Collectives: ranks in a collective wait on the peers that are not in it, or on the odd rank
in another collective."""

from __future__ import annotations

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.model import GNode, WaitGraph
from debug_hang.analyse.graph.threads import frame_text
from debug_hang.analyse.patterns import catalog


def _in_collective(node: GNode) -> bool:
    """True when the node waits for its peers (a collective, DDP's backward, a rendezvous)."""
    pattern = catalog().get(node.pattern or "")
    return pattern is not None and pattern.edge == "collective-peers"


def _collective_group(b: Builder) -> dict[str, list[str]]:
    """Ranks grouped by actor class: the processes that share a process group."""
    groups: dict[str, list[str]] = {}
    for node in b.g.nodes.values():
        if _in_collective(node) and node.class_name:
            groups.setdefault(node.class_name, [])
    for cls in groups:
        for actor_id, actor in b.actors.items():
            if actor.class_name == cls and actor_id in b.actor_node:
                groups[cls].append(b.actor_node[actor_id])
    return groups


@graph_pass(after=("mark_file_lock_holders",), decides=("peer-rank-dead", "collective-skipped", "collective-mismatch"))
def edges_collectives(b: Builder) -> None:
    """Ranks in a collective wait on the peers that are not in it: dead ones first (a dead rank
    explains everything, and peers it took down are collateral), then idle or busy ones."""
    g = b.g
    for _cls, members in _collective_group(b).items():
        waiting = [k for k in members if _in_collective(g.nodes[k])]
        in_it = set(waiting)
        others = [k for k in members if k not in in_it]
        dead = [k for k in others if g.nodes[k].state == "dead"]
        for peer in others:
            node = g.nodes[peer]
            if node.state == "dead":
                node.pattern = "peer-rank-dead"
            elif node.state == "pending":
                # Never started: the waiting ranks wait for it to be scheduled (the pending actor
                # leads on to the resource it waits for).
                node.evidence.append("never started (actor not yet created): its peers wait for it "
                                     "to join the process group")
            elif dead and node.state == "idle":
                node.evidence.append("collateral: not in the collective since a dead peer broke it")
                continue
            elif node.state == "idle" or node.pattern in (None, "idle-worker"):
                node.pattern = "collective-skipped"
                node.evidence.append("not in any collective while its peers are")
            for w in waiting:
                frame = g.nodes[w].frame
                why = "has not started" if node.state == "pending" else "is not"
                g.add_edge(w, peer, g.nodes[w].pattern or "collective-wait",
                           f"in {frame.function if frame is not None else 'a collective'}; "
                           f"{node.name}{'' if node.rank is None else f' rank {node.rank}'} {why}")
        if not others and len(waiting) > 1:
            _mark_mismatch(g, waiting)


def _mark_mismatch(g: WaitGraph, waiting: list[str]) -> None:
    """All ranks are in collectives: the minority deciding line is the odd one out.

    Ranks are grouped by the collective they are in (function and line of the torch frame) and
    the job line that called it. A strict majority names the odd ranks; a tie names every group.
    """
    def where(k: str) -> tuple[str, int | None, str]:
        node = g.nodes[k]
        frame, user = node.frame, node.user_frame
        return ((frame.function, frame.line) if frame else ("?", None)) + (frame_text(user) if user else "",)

    def text(k: str) -> str:
        fn, _line, caller = where(k)
        return f"{fn}" + (f" called from {caller}" if caller else "")

    def ranks(keys: list[str]) -> str:
        known = sorted(r for r in (g.nodes[k].rank for k in keys) if r is not None)
        if len(known) != len(keys):
            return f"{len(keys)} peers are"
        return f"rank {known[0]} is" if len(known) == 1 else "ranks " + ", ".join(str(r) for r in known) + " are"

    groups: dict[tuple[str, int | None, str], list[str]] = {}
    for k in waiting:
        groups.setdefault(where(k), []).append(k)
    if len(groups) < 2:
        return
    sizes = sorted((len(v) for v in groups.values()), reverse=True)
    majority = max(groups.values(), key=len) if sizes[0] > sizes[1] else None
    if majority is None:
        # A tie: DDP runs its collectives on every rank every step, so ranks inside DDP are on
        # the common path and the rank in an explicit collective is the odd one.
        in_ddp = [keys for keys in groups.values() if all(g.nodes[k].pattern == "ddp-wait" for k in keys)]
        if len(in_ddp) == 1:
            majority = in_ddp[0]
    for keys in groups.values():
        if keys is majority:
            continue
        mine = set(keys)
        others = ranks([k for k in waiting if k not in mine])  # once per group, not per rank
        for odd in keys:
            g.nodes[odd].pattern = "collective-mismatch"
            g.nodes[odd].evidence.append(
                f"in {text(odd)} while {others} "
                + (f"in {text(majority[0])}" if majority else "in other collectives")
                + " (gloo/NCCL pair collectives by call order: these never match)")
            for k in majority or []:
                frame = g.nodes[k].frame
                g.add_edge(k, odd, "collective-wait",
                           f"in {frame.function if frame is not None else 'a collective'}; "
                           f"{g.nodes[odd].name}{'' if g.nodes[odd].rank is None else f' rank {g.nodes[odd].rank}'} "
                           f"is in {where(odd)[0]} instead")
