"""Resource waits: pending tasks, actors and placement groups, infeasible or starved demands, and
who holds what they need (blocked holders, leaked groups, idle actors)."""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder, follows, graph_pass
from debug_hang.analyse.graph.model import GNode, NodeKind, NodeState, WaitGraph
from debug_hang.analyse.holders import Holder, idle_actors, leaked_placement_groups, status_reserved_line
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import catalog
from debug_hang.rows import ActorRow, PlacementGroupRow, TaskRow


@follows("placement-group")
def follow_placement_group(b: Builder, key: str) -> None:
    """A thread in pg.ready(): the job's PENDING placement groups."""
    for pg in b.inp.placement_groups:
        if pg.creator_job_id not in (b.job_id, None) or pg.state != "PENDING":
            continue
        pg_key = pg_node(b.g, pg, b.inp.node_totals)
        if b.g.nodes[pg_key].class_name is None:
            b.g.nodes[pg_key].class_name = b.g.nodes[key].class_name  # who waits for it
        b.g.add_edge(key, pg_key, "pg-ready-wait", "waits in pg.ready() for this placement group")


_PG_RESOURCE = re.compile(r"_group_(?:\d+_)?([0-9a-f]{16,})$")


def pending_pg_of(task: TaskRow | ActorRow, placement_groups: list[PlacementGroupRow]) -> PlacementGroupRow | None:
    """The PENDING placement group a task is scheduled into: the task's placement_group_id, or,
    where the State API row lacks it, the group id inside its CPU_group_<i>_<id> resource names."""
    ids = {task.placement_group_id} if task.placement_group_id else {
        m.group(1) for k in (task.required_resources or {}) if (m := _PG_RESOURCE.search(k))}
    return next((pg for pg in placement_groups if pg.placement_group_id in ids and pg.state == "PENDING"), None)


def _amount(resource: str, value: float) -> str:
    """A resource amount as people write it: memory in GiB, the rest as numbers."""
    if resource in ("memory", "object_store_memory") and value >= 2**20:
        return f"{value / 2**30:g} GiB"
    return f"{value:g}"


def resource_node(g: WaitGraph, demand: dict[str, float], node_totals: list[dict[str, float]], who: str,
                   available: dict[str, float] | None = None, requester: str | None = None) -> str:
    """The node for a pending resource demand: infeasible (no node has it), starved (all of it is
    held), or pending (free capacity exists: the scheduler has simply not placed it yet)."""
    demand = {k: float(v) for k, v in demand.items() if float(v) > 0}
    text = ", ".join(f"{k}: {_amount(k, v)}" for k, v in sorted(demand.items())) or "no resources"
    key = f"resource:{text}"
    feasible = any(all(totals.get(k, 0.0) >= v for k, v in demand.items()) for totals in node_totals)
    exhausted = available is None or any(available.get(k, 0.0) < v for k, v in demand.items())
    state: NodeState = "infeasible" if not feasible else ("starved" if exhausted else "pending")
    if key not in g.nodes:
        g.nodes[key] = GNode(key=key, kind="resource", name=f"{{{text}}}", state=state, demand=demand)
        largest = max(node_totals, key=lambda t: t.get("CPU", 0.0), default={})
        shown = {k: v for k, v in largest.items() if k in ("CPU", "GPU") or k in demand}
        g.nodes[key].evidence.append(
            f"{'feasible' if feasible else 'no node can satisfy'} {{{text}}}; largest node has {shown}")
    g.nodes[key].evidence.append(f"requested by {who}")
    if g.nodes[key].class_name is None and requester:
        g.nodes[key].class_name = requester
    return key


def pg_node(g: WaitGraph, pg: PlacementGroupRow, node_totals: list[dict[str, float]]) -> str:
    """The graph node of a PENDING placement group: infeasible (a bundle no node can hold) or not."""
    pg_key = f"pg:{pg.placement_group_id}"
    bundles = list(pg.bundles)
    infeasible = pg.scheduling_state == "INFEASIBLE" or any(
        not any(all(t.get(k, 0.0) >= float(v) for k, v in b.items()) for t in node_totals) for b in bundles)
    if pg_key not in g.nodes:
        g.nodes[pg_key] = GNode(
            key=pg_key, kind="placement_group", name=f"placement group {pg.name or pg.placement_group_id[:12]}",
            state="infeasible" if infeasible else "pending", demand=pg.total,
            evidence=[f"PENDING, scheduling_state {pg.scheduling_state}"
                      + (f", strategy {pg.strategy}" if pg.strategy else "") + f", bundles {bundles}"],
        )
    return pg_key


@graph_pass(after=("edges_collectives",))  # its edges follow the ranks'
def edges_pending_actors(b: Builder) -> None:
    """A pending actor waits for the resources it asks for."""
    g = b.g
    for actor_id, actor in b.actors.items():
        key = b.actor_node.get(actor_id)
        if key is None or g.nodes[key].state != "pending":
            continue
        demand = dict(actor.required_resources or {})
        creation = next((t for t in b.index.of_actor(actor_id) if t.type == "ACTOR_CREATION_TASK"), None)
        if creation and creation.required_resources:
            demand = dict(creation.required_resources)
        if _edge_to_pending_group(b, key, actor, creation):
            continue
        res = resource_node(g, demand, b.inp.node_totals, f"actor {actor.class_name}", b.inp.available,
                             requester=actor.class_name)
        g.add_edge(key, res, "infeasible-resource", "waits to be scheduled")


# What a demand's state makes it, by node kind: a request no node can hold, one whose resources are
# all taken, a placement group that cannot be placed or waits for room.
_DEMAND_PATTERNS: dict[tuple[NodeKind, NodeState], PatternId] = {
    ("resource", "infeasible"): "infeasible-resource",
    ("resource", "starved"): "resource-starvation",
    ("placement_group", "infeasible"): "placement-group-infeasible",
    ("placement_group", "pending"): "resource-starvation",
}


@graph_pass(after=("edges_pending_actors",), decides=("infeasible-resource", "resource-starvation", "placement-group-infeasible"))
def classify_demands(b: Builder) -> None:
    """Each pending demand and group (made by whichever pass met it first) named by its state."""
    for node in b.g.nodes.values():
        if node.pattern is None:
            node.pattern = _DEMAND_PATTERNS.get((node.kind, node.state))


@graph_pass(after=("classify_demands",))
def edges_starved_resources(b: Builder) -> None:
    """A starved resource demand waits for the blocked or busy processes that hold it."""
    g = b.g
    for key, node in list(g.nodes.items()):
        if node.kind != "resource" or node.state != "starved":
            continue
        wanted = set(re.findall(r"([A-Za-z_][\w:]*): ", node.name))
        for holder_key, holder in g.nodes.items():
            if holder.kind == "resource" or holder.state not in ("blocked", "busy"):
                continue
            holder_actor = b.actors.get(holder.actor_id or "")
            held = dict(holder_actor.required_resources) if holder_actor else {}
            for task in b.running.get(holder_key, []):
                if task.type == "NORMAL_TASK":
                    held.update(task.required_resources or {})
            if any(float(held.get(r, 0)) > 0 for r in wanted):
                g.add_edge(key, holder_key, "resource-starvation",
                           f"{holder.name} holds {{{', '.join(f'{r}: {held[r]:g}' for r in wanted if r in held)}}}")


def _edge_to_pending_group(b: Builder, key: str, actor: ActorRow, creation: TaskRow | None) -> bool:
    """A pending actor to be placed in a PENDING placement group waits for the group (its
    resources are the group's CPU_group_<i>_<id> names, which no node has until it is placed)."""
    pgs = b.inp.placement_groups
    pg = pending_pg_of(actor, pgs) or (pending_pg_of(creation, pgs) if creation else None)
    if pg is None:
        return False
    pg_key = pg_node(b.g, pg, b.inp.node_totals)
    note = f"actor {actor.class_name} is to be placed in it"
    if note not in b.g.nodes[pg_key].evidence:
        b.g.nodes[pg_key].evidence.append(note)
    if b.g.nodes[pg_key].class_name is None:
        b.g.nodes[pg_key].class_name = actor.class_name
    b.g.add_edge(key, pg_key, "pg-ready-wait", "waits to be placed in its placement group, which is PENDING")
    return True


@graph_pass(after=("edges_starved_resources",), decides=("placement-group-leaked", "idle-actor-holds-resources"))
def edges_resource_holders(b: Builder) -> None:
    """A feasible request unmet for lack of resources (a starved task or actor, a PENDING group)
    waits for whoever holds what it needs and uses none of it: placement groups with no live user
    and idle actors, of this job or any other (blocked holders are edges_starved_resources')."""
    inp, g = b.inp, b.g
    demands = [k for k in g.nodes if _unmet_for_lack_of_resources(b, k)]
    if not demands:
        return
    jobs = {str(j.job_id): j for j in inp.jobs}
    holders = [h for h in leaked_placement_groups(inp.placement_groups, inp.actors, inp.tasks, jobs, inp.now_s, inp.usage)
               if h.used or h.age_s is None or h.age_s >= _threshold("placement-group-leaked", "min_age_never_used_s")]
    holders += [h for h in idle_actors(inp.actors, inp.tasks, jobs, inp.now_s)
                if h.age_s is None or h.age_s >= _threshold("idle-actor-holds-resources", "min_idle_s")]
    reserved = status_reserved_line(inp.status_text)
    for key in demands:
        need = g.nodes[key].demand
        wanted = {r for r in need if r not in ("memory", "object_store_memory")}
        for holder in holders:
            if not holder.holds_any(wanted) or key == f"pg:{holder.id}":
                continue
            holder_key = _holder_node(b, holder, reserved)
            if holder_key is not None:
                g.add_edge(key, holder_key, "held-by",
                           f"needs {{{', '.join(f'{r}: {need[r]:g}' for r in sorted(wanted))}}}; {holder.name} holds "
                           f"{holder.held_text(wanted)} and nothing uses it")


def _unmet_for_lack_of_resources(b: Builder, key: str) -> bool:
    """A feasible request that waits because what it needs is taken: a starved task or actor
    request, or a PENDING group whose scheduler said NO_RESOURCES (or whose bundles exceed what is
    free). A request with free capacity is merely not placed yet: nobody holds it up."""
    node = b.g.nodes[key]
    if not node.demand or node.kind not in ("resource", "placement_group"):
        return False
    if node.kind == "resource":
        return node.state == "starved"
    pg = next((p for p in b.inp.placement_groups if f"pg:{p.placement_group_id}" == key), None)
    if node.state != "pending" or pg is None or pg.state != "PENDING":
        return False
    if pg.scheduling_state == "NO_RESOURCES":
        return True
    free = b.inp.available
    return free is not None and any(free.get(r, 0.0) < v for r, v in node.demand.items())


def _threshold(pattern: str, name: str) -> float:
    """A number the catalog gives a pattern's rule (references/patterns.yaml `thresholds`), 0 if none."""
    found = catalog().get(pattern)
    return float(found.thresholds.get(name, 0.0)) if found is not None else 0.0


def _holder_node(b: Builder, holder: Holder, reserved: str | None) -> str | None:
    """The graph node of a resource holder, made when it is not in the graph yet; None for an
    actor of this job whose own stack shows it doing something (the stack outranks the listing)."""
    g = b.g
    key = b.actor_node.get(holder.id) if holder.kind == "actor" else None
    if key is not None and g.nodes[key].state != "idle":
        return None
    if key is None:
        key = f"pg:{holder.id}" if holder.kind == "placement_group" else f"actor:{holder.id}"
        if key not in g.nodes:
            g.nodes[key] = GNode(key=key, kind="placement_group" if holder.kind == "placement_group" else "actor",
                                 name=holder.name, state="idle", pid=holder.pid, node_id=holder.node_id,
                                 actor_id=holder.id if holder.kind == "actor" else None, class_name=holder.class_name)
    node = g.nodes[key]
    node.pattern = holder.pattern
    notes = [*holder.evidence, _release_advice(holder)]
    if holder.kind == "placement_group" and reserved:
        notes.append(f"`ray status` shows `{reserved}`: the reservation reads as unused resources (0.0 used) and the "
                     "waiting group as a pending demand; the group holding them is not named — the usual disguise "
                     "of a leaked group")
    node.evidence += [text for text in notes if text not in node.evidence]
    return key


def _release_advice(holder: Holder) -> str:
    """How to release a holder (advice only: the diagnosis never changes the cluster)."""
    if holder.kind == "placement_group":
        named = holder.class_name and not holder.name.endswith(holder.id[:12])
        how = (f"ray.util.remove_placement_group(ray.util.get_placement_group({holder.class_name!r})) from its namespace"
               if named else f"ray.util.remove_placement_group on group {holder.id} (`ray list placement-groups`)")
    else:
        how = "ray.kill(<its handle>) (a named actor: ray.get_actor(name, namespace=...))"
    return f"to release it: {how} — advice only, this tool changes nothing"
