"""The wait-for graph as a picture's model: which nodes to draw, folded into boxes, in layers.

Drawn: every node of a reported cause (its victims, its culprits, a cycle's members); with no
cause, every node with a wait edge. Nodes that wait on the same nodes for the same reason and
are of one kind, state and place (1,998 ranks in one all_reduce, 500 pending tasks on one
request) fold into one box that says how many they are (`TrainWorker × 1,998`, `ranks 0–1,
3–1,336, …`); culprits and cycle members are never folded in with the rest. When that still
leaves more than MAX_BOXES boxes (a chain of thousands, each waiting on the next), nodes of one
kind, state and place fold regardless of whom they wait on. Layers go from the victims (top) to
the culprits (bottom); an edge that closes a cycle is marked `back`. Only reads the Diagnosis.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from debug_hang.analyse.graph import GNode

if TYPE_CHECKING:
    from debug_hang.analyse.diagnosis import Diagnosis

MAX_CAUSES = 5
MAX_BOXES = 40  # boxes drawn at most; the rest are counted in a note
FOLD_AT = 4  # a group of this many nodes or more is one box (smaller ones are drawn one by one)
PLACE_CHARS = 38  # a box line (svg.CHARS)
MAX_NODES = 50_000  # nodes looked at (a graph larger than this is cut, and says so)


@dataclass
class Box:
    id: str
    keys: list[str]
    title: str
    lines: list[str]
    culprit: bool = False
    in_cycle: bool = False
    state: str = ""
    layer: int = 0
    order: float = 0.0


@dataclass
class Arrow:
    src: str
    dst: str
    label: str
    count: int
    back: bool = False  # closes a cycle (drawn apart)


@dataclass
class GraphView:
    boxes: list[Box]
    arrows: list[Arrow]
    layers: list[list[Box]]
    notes: list[str] = field(default_factory=list)


def thousands(n: int) -> str:
    return f"{n:,}"


def rank_text(ranks: list[int], most: int = 3) -> str:
    """`0–1, 3–1,336, 1,338–1,999` (at most `most` ranges, then `…`)."""
    spans: list[tuple[int, int]] = []
    for r in sorted(set(ranks)):
        if spans and r == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], r)
        else:
            spans.append((r, r))
    text = ", ".join(thousands(a) if a == b else f"{thousands(a)}–{thousands(b)}" for a, b in spans[:most])
    return text + (", …" if len(spans) > most else "")


def _wanted(diag: Diagnosis) -> tuple[list[str], set[str], set[str]]:
    """The keys to draw, the culprits' and the cycles' keys."""
    culprits: set[str] = set()
    cycles: set[str] = set()
    keys: list[str] = []
    for cause in diag.causes[:MAX_CAUSES]:
        culprits |= {c.key for c in cause.culprits}
        cycles |= set(cause.cycle)
        keys += [c.key for c in cause.culprits] + list(cause.cycle) + list(cause.victims)
    if not diag.causes:
        keys = [k for e in diag.graph.edges for k in (e.src, e.dst)]
    keys = [k for k in dict.fromkeys(keys) if k in diag.graph.nodes]
    return keys[:MAX_NODES], culprits, cycles


def _place(node: GNode) -> str:
    """Where a waiting or running node is in the job's code (`at Trainer.fit :89`), else the
    deciding frame's function; nothing for an idle one."""
    if node.state == "idle":
        return ""
    if node.user_frame is not None:
        text = f"at {node.user_frame.function} :{node.user_frame.line}"
        return text if len(text) <= PLACE_CHARS else f"at {node.user_frame.function.rsplit('.', 1)[-1]} :{node.user_frame.line}"
    return f"in {node.frame.function.rsplit('.', 1)[-1]}" if node.frame is not None else ""


def _kind(node: GNode) -> str:
    return node.class_name or node.task_name or node.name


def _group(diag: Diagnosis, keys: list[str], culprits: set[str], cycles: set[str], by_targets: bool) -> dict[tuple[object, ...], list[str]]:
    groups: dict[tuple[object, ...], list[str]] = {}
    for key in keys:
        node = diag.graph.nodes[key]
        # Culprits and cycle members fold only with their own kind (four alike ShardLoaders in one
        # starvation cycle are one box, its cycle a pair of arrows).
        targets = frozenset((e.dst, e.why) for e in diag.graph.out(key)) if by_targets else frozenset()
        sig: tuple[object, ...] = (key in culprits, key in cycles, node.kind, _kind(node), node.state, node.pattern, _place(node), targets)
        groups.setdefault(sig, []).append(key)
    return groups


def _box(diag: Diagnosis, i: int, members: list[str], culprits: set[str], cycles: set[str]) -> Box:
    nodes = [diag.graph.nodes[k] for k in members]
    first = nodes[0]
    what = first.pattern or first.state
    place = _place(first)
    if len(nodes) == 1:
        where = " · ".join(x for x in (f"pid {first.pid}" if first.pid else None,
                                       f"node {first.node_id[:8]}" if first.node_id else None) if x)
        lines = [x for x in (where, place or None, f"{first.state} · {what}") if x]
        title = first.label().rsplit(" (", 1)[0] if first.pid else first.label()
    else:
        ranks = [n.rank for n in nodes if n.rank is not None]
        hosts = {n.node_id for n in nodes if n.node_id}
        lines = [x for x in (f"ranks {rank_text(ranks)}" if ranks else None,
                             place or None,
                             f"on {thousands(len(hosts))} nodes" if len(hosts) > 1 else None,
                             f"{first.state} · {what}") if x]
        title = f"{_kind(first)} × {thousands(len(nodes))}"
    return Box(id=f"b{i}", keys=members, title=title, lines=lines, culprit=any(k in culprits for k in members),
               in_cycle=any(k in cycles for k in members), state=first.state)


def _arrows(diag: Diagnosis, box_of: dict[str, str]) -> list[Arrow]:
    pairs: dict[tuple[str, str], Counter[str]] = {}
    for edge in diag.graph.edges:
        a, b = box_of.get(edge.src), box_of.get(edge.dst)
        if a is None or b is None:
            continue
        pairs.setdefault((a, b), Counter())[edge.evidence or edge.why] += 1
    return [Arrow(a, b, label.most_common(1)[0][0], sum(label.values())) for (a, b), label in pairs.items()]


def _components(ids: list[str], succ: dict[str, list[Arrow]]) -> dict[str, int]:
    """Strongly connected components (Tarjan, iterative): box id -> component number."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    comp: dict[str, int] = {}
    stack: list[str] = []
    counter = 0
    for root in ids:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, [])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        while work:
            node, it = work[-1]
            arrow = next(it, None)
            if arrow is not None:
                nxt = arrow.dst
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    work.append((nxt, iter(succ.get(nxt, []))))
                elif nxt not in comp:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    comp[member] = index[node]
                    if member == node:
                        break
    return comp


def _mark_back(ids: list[str], arrows: list[Arrow]) -> None:
    """Mark the arrows that close a cycle. Inside a cycle the boxes someone outside waits on are
    its entries, drawn first: an arrow back into an entry closes the cycle. What is left is made
    acyclic by a depth-first search (an arrow to a box still on the search's path closes one)."""
    succ: dict[str, list[Arrow]] = {}
    for arrow in arrows:
        succ.setdefault(arrow.src, []).append(arrow)
    comp = _components(ids, succ)
    entries = {a.dst for a in arrows if comp[a.src] != comp[a.dst]}
    for arrow in arrows:
        arrow.back = arrow.src == arrow.dst or (comp[arrow.src] == comp[arrow.dst] and arrow.dst in entries)
    state: dict[str, int] = {}
    has_in = {a.dst for a in arrows if not a.back}
    for root in sorted(ids, key=lambda b: b in has_in):
        if root in state:
            continue
        state[root] = 0
        work = [(root, iter([a for a in succ.get(root, []) if not a.back]))]
        while work:
            node, it = work[-1]
            step = next(it, None)
            if step is None:
                state[node] = 1
                work.pop()
            elif state.get(step.dst) == 0:
                step.back = True
            elif step.dst not in state:
                state[step.dst] = 0
                work.append((step.dst, iter([a for a in succ.get(step.dst, []) if not a.back])))


def _layers(boxes: list[Box], arrows: list[Arrow]) -> list[list[Box]]:
    """Longest-path layers over the arrows that close no cycle: victims on top, each box below
    all it is waited on by; a box nobody waits on sits just above the highest box it waits on."""
    ids = [b.id for b in boxes]
    _mark_back(ids, arrows)
    forward = [a for a in arrows if not a.back]
    preds: dict[str, list[str]] = {}
    succs: dict[str, list[str]] = {}
    for a in forward:
        preds.setdefault(a.dst, []).append(a.src)
        succs.setdefault(a.src, []).append(a.dst)
    depth: dict[str, int] = {}
    pending = {i: len(preds.get(i, [])) for i in ids}
    ready = [i for i in ids if pending[i] == 0]
    order: list[str] = []
    while ready:  # Kahn: a topological order of the forward arrows
        node = ready.pop()
        order.append(node)
        depth[node] = max((depth[p] + 1 for p in preds.get(node, [])), default=0)
        for nxt in succs.get(node, []):
            pending[nxt] -= 1
            if pending[nxt] == 0:
                ready.append(nxt)
    for node in reversed(order):  # sources pulled down next to what they wait on
        if not preds.get(node) and succs.get(node):
            depth[node] = max(depth[node], min(depth[s] for s in succs[node]) - 1)
    by_id = {b.id: b for b in boxes}
    layers: list[list[Box]] = [[] for _ in range(max(depth.values(), default=0) + 1)]
    for box_id in ids:
        by_id[box_id].layer = depth.get(box_id, 0)
        layers[by_id[box_id].layer].append(by_id[box_id])
    _order(layers, arrows, by_id)
    return layers


def _order(layers: list[list[Box]], arrows: list[Arrow], by_id: dict[str, Box]) -> None:
    """Each layer ordered by the mean position of the boxes it is tied to (two sweeps)."""
    for i, box in enumerate(layers[0] if layers else []):
        box.order = float(i)
    for _ in range(2):
        for layer in layers[1:]:
            for box in layer:
                ups = [by_id[a.src].order for a in arrows if a.dst == box.id and not a.back and a.src != a.dst]
                box.order = sum(ups) / len(ups) if ups else box.order
            layer.sort(key=lambda b: (b.order, not b.culprit, b.id))
            for i, box in enumerate(layer):
                box.order = float(i)


def build_view(diag: Diagnosis) -> GraphView:
    """The boxes, arrows and layers of the picture (see the module docstring)."""
    keys, culprits, cycles = _wanted(diag)
    cut_nodes = len(diag.graph.nodes) - MAX_NODES if not diag.causes else 0
    notes = [f"{cut_nodes:,} more graph nodes not drawn"] if cut_nodes > 0 else []
    groups = _group(diag, keys, culprits, cycles, by_targets=True)
    members = _split(groups)
    if len(members) > MAX_BOXES:
        members = _split(_group(diag, keys, culprits, cycles, by_targets=False))
    members.sort(key=lambda m: (not any(k in culprits or k in cycles for k in m), -len(m)))
    if len(members) > MAX_BOXES:
        cut = members[MAX_BOXES:]
        notes.append(f"{sum(len(m) for m in cut):,} more process(es) in {len(cut)} group(s) not drawn (diagnosis.json has them)")
        members = members[:MAX_BOXES]
    boxes = [_box(diag, i, m, culprits, cycles) for i, m in enumerate(members)]
    box_of = {k: b.id for b in boxes for k in b.keys}
    arrows = _arrows(diag, box_of)
    return GraphView(boxes=boxes, arrows=arrows, layers=_layers(boxes, arrows), notes=notes)


def _split(groups: dict[tuple[object, ...], list[str]]) -> list[list[str]]:
    """Groups of FOLD_AT or more stay one box; smaller ones are drawn node by node."""
    out: list[list[str]] = []
    for keys in groups.values():
        out += [keys] if len(keys) >= FOLD_AT else [[k] for k in keys]
    return out
