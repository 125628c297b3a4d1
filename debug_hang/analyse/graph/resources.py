"""Resource waits: pending tasks, actors and placement groups, infeasible or starved demands, and
who holds what they need (blocked holders, leaked groups, idle actors)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from debug_hang.analyse.capacity import Capacity, Claim, bundles_with_room, claims, describe, fits, group_fits, group_of, norm, pin_of
from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, follows, graph_pass
from debug_hang.analyse.graph.model import GNode, NodeKind, NodeState, WaitGraph
from debug_hang.analyse.holders import Holder, idle_actors, leaked_placement_groups, live_creators, status_reserved_line
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


def capacity_of(b: Builder) -> Capacity:
    """What every node (and every placed group's bundles) has and has free, read once per build."""
    if b.capacity is None:
        inp = b.inp
        b.capacity = Capacity.of(inp.node_totals, inp.usage_by_node, inp.available, inp.placement_groups)
    return b.capacity


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether a node's labels satisfy a Ray label selector: `v` (equal), `!v` (not equal, or
    absent), `in(a,b)` (one of), `!in(a,b)` (none of, or absent)."""
    for key, want in selector.items():
        have = labels.get(key)
        negate = want.startswith("!")
        body = want[1:] if negate else want
        values = ([v.strip() for v in body[3:-1].split(",")] if body.startswith("in(") and body.endswith(")")
                  else [body])
        hit = have is not None and have in values
        if hit == negate:
            return False
    return True


def unmatched_selector(b: Builder, selector: dict[str, str]) -> bool:
    """A label selector no alive node satisfies (False when the nodes' labels are not reported)."""
    labels = b.inp.node_labels
    return bool(selector) and labels is not None and not any(selector_matches(selector, n) for n in labels)


def resource_node(b: Builder, demand: dict[str, float], who: str, requester: str | None = None,
                  since_ms: float | None = None, selector: dict[str, str] | None = None) -> str:
    """The node for a pending resource demand: infeasible (no node, or no bundle of its placement
    group, could ever hold it, or no node has the labels its label selector asks for), starved (no
    node has room for it now), or pending (one has: the scheduler has simply not placed it yet)."""
    g, cap = b.g, capacity_of(b)
    demand = {k: float(v) for k, v in demand.items() if float(v) > 0}
    text = describe(demand) if demand else "{no resources}"
    if selector and unmatched_selector(b, selector):
        wanted = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
        key = f"resource:{text} on labels {wanted}"
        if key not in g.nodes:
            have = sorted({f"{k}={v}" for n in b.inp.node_labels or [] for k, v in n.items()
                           if not k.startswith("ray.io/")})
            g.nodes[key] = GNode(key=key, kind="resource", name=f"{text} on a node labelled {wanted}",
                                 state="infeasible", demand=demand)
            g.nodes[key].evidence.append(
                f"label_selector {{{wanted}}}: no alive node has these labels (the nodes' own labels: "
                f"{', '.join(have) or 'none but ray.io/*'}), however free their resources")
        return _requested(b, key, who, requester, since_ms)
    key = f"resource:{text}"
    feasible = cap.feasible(demand)
    state: NodeState = "infeasible" if not feasible else ("pending" if cap.placeable_now(demand) else "starved")
    if key not in g.nodes:
        g.nodes[key] = GNode(key=key, kind="resource", name=text, state=state, demand=demand)
        if group_of(demand):
            g.nodes[key].evidence.append(
                f"{'a bundle can hold' if feasible else 'no bundle of the group can hold'} {text} (it is scheduled into "
                "the group: only the group's bundles count, and what its own members hold of them)")
        else:
            largest = max(b.inp.node_totals, key=lambda t: t.get("CPU", 0.0), default={})
            shown = {k: v for k, v in largest.items() if k in ("CPU", "GPU") or k in demand}
            g.nodes[key].evidence.append(
                f"{'feasible' if feasible else 'no node can satisfy'} {text}; largest node has {shown}")
    return _requested(b, key, who, requester, since_ms)


def _requested(b: Builder, key: str, who: str, requester: str | None, since_ms: float | None) -> str:
    """Note who asks for a demand node's resources, and since when: the node's key."""
    node = b.g.nodes[key]
    node.evidence.append(f"requested by {who}")
    if node.class_name is None and requester:
        node.class_name = requester
    if since_ms:
        b.demand_since[key] = min(b.demand_since.get(key, since_ms), since_ms)
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
    """A pending actor waits for the resources it asks for; so does an actor being restarted,
    which asks for them again (its old worker is gone: the State API keeps its old pid), when no
    node has room for it now (with room, the restart is simply under way)."""
    g = b.g
    for actor_id, actor in b.actors.items():
        key = b.actor_node.get(actor_id)
        if key is None or g.nodes[key].state not in ("pending", "restarting"):
            continue
        if actor.state == "ALIVE":
            continue  # placed: it holds what it asked for (a crash loop's node is "restarting" even then)
        restarting = g.nodes[key].state == "restarting" or actor.state == "RESTARTING"
        demand = dict(actor.required_resources or {})
        creation = next((t for t in b.index.of_actor(actor_id) if t.type == "ACTOR_CREATION_TASK"), None)
        if creation and creation.required_resources:
            demand = dict(creation.required_resources)
        if not restarting and _edge_to_pending_group(b, key, actor, creation):
            continue
        if restarting and (capacity_of(b).free is None or capacity_of(b).placeable_now(demand)):
            continue  # room for it (or no load report to tell): the restart is under way
        since = _last_call_end(b, actor_id) if restarting else (creation.creation_time_ms if creation else None)
        selector = actor.label_selector or (creation.label_selector if creation else {})
        res = resource_node(b, demand, f"actor {actor.class_name}" + (" (being restarted)" if restarting else ""),
                            requester=actor.class_name, since_ms=since, selector=selector)
        g.add_edge(key, res, "infeasible-resource",
                   "is being restarted and waits to be placed again" if restarting else "waits to be scheduled")


def _last_call_end(b: Builder, actor_id: str) -> float | None:
    """When an actor last finished a call (it died after that)."""
    ends = [t.end_time_ms for t in b.index.of_actor(actor_id) if t.state == "FINISHED" and t.end_time_ms]
    return max(ends) if ends else None


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


@graph_pass(after=("classify_demands",), decides=("placement-group-leaked", "idle-actor-holds-resources", "data-pool-holds-resources",
                                                       "placement-group-bundle-pinned"))
def edges_resource_holders(b: Builder) -> None:
    """Every unmet demand has holders. A feasible request that waits for lack of room (a starved
    task or actor, a PENDING group, an actor to restart, work scheduled into a full group) waits
    for whoever holds what it needs, of this job or any other: ALIVE actors, RUNNING tasks,
    CREATED groups (capacity.py). Each holder either never frees it (an idle actor, a group with
    no live user, a holder that itself waits for this demand: a cycle) or may (busy, running a
    call, waiting on something else). When some node would have room once those that may free it
    do, the request waits on them (their own state decides); when none would, it waits on those
    that never will: they are the culprits."""
    demands = [k for k in b.g.nodes if _unmet_for_lack_of_resources(b, k)]
    if not demands:
        return
    inp = b.inp
    jobs = {str(j.job_id): j for j in inp.jobs}
    unused = leaked_placement_groups(inp.placement_groups, inp.actors, inp.tasks, jobs, inp.now_s, inp.usage)
    creators = _waiting_creators(b, [h for h in unused if not h.used and not h.orphaned])
    never: dict[str, Holder] = {
        h.id: h for h in unused if h.id not in creators
        and (h.used or h.orphaned or h.age_s is None or h.age_s >= _threshold("placement-group-leaked", "min_age_never_used_s"))}
    never |= {h.id: h for h in idle_actors(inp.actors, inp.tasks, jobs, inp.now_s)
              if h.age_s is None or h.age_s >= _threshold("idle-actor-holds-resources", "min_idle_s")}
    for holder in never.values():
        _mark_data_pool(b, holder)
    held = claims(inp.actors, inp.tasks, inp.placement_groups, _cpu_released(b))
    reserved = status_reserved_line(inp.status_text)
    for key in demands:
        _follow_holders(b, key, held, never, reserved, creators)


def _waiting_creators(b: Builder, groups: list[Holder]) -> dict[str, list[tuple[str, TaskRow]]]:
    """Groups nothing was placed in yet whose creator is alive and waits (blocked): each with the
    graph nodes of its possible creators and the call each made it in. Such a group is held for
    the work its creator starts once its wait ends (hold-and-wait), not leaked."""
    out: dict[str, list[tuple[str, TaskRow]]] = {}
    rows = {p.placement_group_id: p for p in b.inp.placement_groups}
    for holder in groups:
        found: list[tuple[str, TaskRow]] = []
        for call in live_creators(rows[holder.id], b.inp.tasks, b.inp.actors):
            key = b.actor_node.get(call.actor_id) if call.actor_id else (
                b.by_pid.get(call.worker) if call.worker is not None else None)
            if key is not None and b.g.nodes[key].state == "blocked" and all(k != key for k, _ in found):
                found.append((key, call))
        if found:
            out[holder.id] = found
    return out


def _mark_data_pool(b: Builder, holder: Holder) -> None:
    """An idle actor of a Ray Data operator's pool is the dataset's own, started before any input
    reached it and kept for the whole dataset: the fix is the pool's size, never a kill."""
    found = b.inp.libraries.pool_operator(holder.class_name, holder.job_id) if holder.kind == "actor" else None
    if found is None:
        return
    ds, op = found
    holder.pattern = "data-pool-holds-resources"
    holder.evidence.append(
        f"one of the actor pool of Ray Data's operator {op.name} (dataset {ds.dataset}, {ds.state}; the operator "
        f"{op.state}, {op.progress or 0} block(s) out): Ray Data starts the pool before input reaches it and keeps "
        "it for the whole dataset")


def _cpu_released(b: Builder) -> set[str]:
    """Normal tasks whose stack is inside ray.get / ray.wait: Ray lends their CPUs out meanwhile."""
    out: set[str] = set()
    for key, running in b.running.items():
        if b.g.nodes[key].pattern == "ray-get-wait":
            out |= {t.task_id for t in running if t.type == "NORMAL_TASK"}
    return out


@dataclass
class _Held:
    """One holder of what a demand needs: its claims (one per node), its graph node (None: not in
    the graph, only named), and whether it can ever free what it holds."""

    claims: list[Claim]
    key: str | None
    frees: bool  # may release it (False: idle, leaked, or waits for the demand itself)
    how: str  # its state, as said in the evidence
    cyclic: bool = False  # never frees because it waits for the demand itself (not idle or leaked)

    def amounts(self, wanted: set[str]) -> str:
        keys = {norm(w) for w in wanted}
        total: dict[str, float] = {}
        for c in self.claims:
            for k, v in c.held.items():
                if norm(k) in keys:
                    total[k] = total.get(k, 0.0) + v
        return describe(total)

    def text(self, wanted: set[str]) -> str:
        return f"{self.claims[0].name} {self.amounts(wanted)} ({self.how})"


def _demand_of(b: Builder, key: str) -> tuple[dict[str, float], PlacementGroupRow | None]:
    """What an unmet demand needs, and the PENDING group it is (None: a task or actor request)."""
    node = b.g.nodes[key]
    pg = next((p for p in b.inp.placement_groups if f"pg:{p.placement_group_id}" == key), None)
    return dict(node.demand), pg


def _follow_holders(b: Builder, key: str, held: list[Claim], never: dict[str, Holder], reserved: str | None,
                    creators: dict[str, list[tuple[str, TaskRow]]]) -> None:
    g, cap = b.g, capacity_of(b)
    need, pg = _demand_of(b, key)
    wanted = {r for r in need if r != "object_store_memory" and need[r] > 0}
    pool = group_of(need) if pg is None else None
    mine = [c for c in held if c.pool == pool and c.holds_any(wanted) and not (pg and c.id == pg.placement_group_id)]
    if pg is None and _pinned_to_a_full_bundle(b, key, need, held, mine, never, reserved, creators):
        return
    holders: dict[str, _Held] = {}
    for claim in mine:
        if claim.id in holders:
            holders[claim.id].claims.append(claim)
            continue
        holders[claim.id] = _resolve(b, claim, key, never, reserved, creators)
    maybe = [c for h in holders.values() if h.frees for c in h.claims]
    maybe += cap.unlisted([c for c in held if c.pool == pool], wanted)
    room = cap.room_after(maybe)
    later = group_fits(pg.bundles, pg.strategy, room) if pg is not None else fits(need, room)
    lead = [h for h in holders.values() if h.frees == later and h.key is not None]
    if not later and _fits_without_the_stuck(b, pg, need, maybe, holders):
        # Those that wait for this request would go on once the idle or leaked holders released
        # theirs: the request waits on those alone (no cycle of its own holders).
        lead = [h for h in lead if not h.cyclic]
    node = g.nodes[key]
    listed = sorted(holders.values(), key=lambda h: (h.frees != later, h.claims[0].name))
    if listed:
        shown = "; ".join(h.text(wanted) for h in listed[:6]) + (f"; and {len(listed) - 6} more" if len(listed) > 6 else "")
        node.evidence.append(f"held by: {shown}")
    unlisted = [c for c in maybe if c.kind == "unlisted"]
    if unlisted:
        node.evidence.append("the load report counts " + ", ".join(c.text() for c in unlisted)
                             + " as used that no listed actor, task or group holds (a listing cut short or lagging?)")
    if later:
        node.evidence.append("it gets room once holders that may still finish release theirs: it waits on them, "
                             "not a hang by itself")
    elif listed:
        stuck = ", ".join(sorted({h.claims[0].name for h in holders.values() if not h.frees}))
        node.evidence.append(f"no node gets room for it even if every holder that may finish released its share: "
                             f"only {stuck} could free it, and {'it never will' if stuck else 'nothing will'}")
    since = b.demand_since.get(key)
    for h in lead:
        assert h.key is not None
        target = g.nodes[h.key]
        # only what never frees: those took what this request waits for, for good
        after = [c.since_ms - since for c in h.claims if c.since_ms and since and c.since_ms > since and not h.frees]
        late = min(after) / 1000.0 if after else 0.0
        note = f" (placed {late:.{0 if late >= 10 else 1}f} s after this request began waiting)" if late >= 0.1 else ""
        amounts = h.amounts(wanted)
        if h.frees:
            # A holder that computes (busy, or unread) is work in flight: named in the evidence, and
            # the request stays the chain's end (the verdict weighs its holders' work); one that
            # waits is followed, as what it waits for may never come.
            if target.state == "blocked":
                g.add_edge(key, h.key, "held-by", f"{target.name} holds {amounts}; it {h.how}: may free them when done{note}")
        elif target.state in ("blocked", "busy", "unknown") and target.kind != "placement_group":
            g.add_edge(key, h.key, "resource-starvation", f"{target.name} holds {amounts}{note}")
            if (short := _short(cap, need, wanted)) and not short & _BUILTIN:
                choose(target, "custom_resource_held")  # a licence seat, an accelerator: not num_cpus=0
        elif target.kind == "placement_group" and target.state == "blocked":
            who = "its creator" if any(e.why == "placement-group-hold-and-wait" for e in g.out(h.key)) else "its members"
            g.add_edge(key, h.key, "resource-starvation", f"{target.name} reserves {amounts} for {who}{note}")
        else:
            g.add_edge(key, h.key, "held-by", f"needs {describe({r: need[r] for r in wanted})}; "
                       f"{target.name} holds {amounts} and nothing uses it{note}")


_BUILTIN = frozenset({"CPU", "GPU", "memory", "object_store_memory"})


def _short(cap: Capacity, need: dict[str, float], wanted: set[str]) -> set[str]:
    """The resources of a request that no node has free enough of now (empty when the load report is missing)."""
    if cap.free is None:
        return set()
    return {r for r in wanted if not any(room.get(norm(r), 0.0) + 1e-6 >= need[r] for room in cap.free.values())}


def _pinned_to_a_full_bundle(b: Builder, key: str, need: dict[str, float], held: list[Claim], mine: list[Claim],
                             never: dict[str, Holder], reserved: str | None,
                             creators: dict[str, list[tuple[str, TaskRow]]]) -> bool:
    """A request pinned to bundle i of a CREATED group (placement_group_bundle_index=i: it names
    CPU_group_<i>_<id>) whose holders there never free it, while another bundle j of the group has
    room for it now: the scheduler never moves a pinned request, so the pin is the cause, not the
    holders (named, not followed). A bundle whose holder may still finish (a task that returns) is
    a wait on it, and a group with no bundle free is the holders' doing: both left to the rest."""
    pin = pin_of(need)
    if pin is None:
        return False
    pg = next((p for p in b.inp.placement_groups if p.placement_group_id == pin.group and p.state == "CREATED"), None)
    if pg is None or pin.index >= len(pg.bundles):
        return False
    cap = capacity_of(b)
    spare = bundles_with_room(pin, pg, cap, held)
    if not spare:
        return False
    found: dict[str, _Held] = {}
    for claim in mine:
        if claim.id in found:
            found[claim.id].claims.append(claim)
        else:
            found[claim.id] = _resolve(b, claim, key, never, reserved, creators, mark=False)
    maybe = [c for h in found.values() if h.frees for c in h.claims] + cap.unlisted([c for c in held if c.pool == pin.group], need)
    if fits(need, cap.room_after(maybe)):
        return False  # its bundle frees once a holder that may finish does: it waits on them
    node = b.g.nodes[key]
    node.pattern = "placement-group-bundle-pinned"
    wanted = set(need)
    holders = "; ".join(h.text(wanted) for h in sorted(found.values(), key=lambda h: h.claims[0].name)[:6])
    group = f"placement group {pg.name or pg.placement_group_id[:12]}"
    free = "; ".join(f"bundle {j} has {describe(room)} free" for j, room in spare[:4])
    node.evidence.append(
        f"pinned to bundle {pin.index} of {group} (placement_group_bundle_index={pin.index}: it asks for "
        f"{describe(pin.need)} of that bundle alone; the group has {len(pg.bundles)} bundle(s), bundle {pin.index} "
        f"is {describe(pg.bundles[pin.index])})")
    node.evidence.append(f"bundle {pin.index} is full and never frees: held by {holders or 'holders the listing does not name'}")
    node.evidence.append(f"{free} now: a pinned bundle index is a hard constraint (the scheduler never places it in "
                         "another bundle); the pin keeps it waiting, not the holder")
    for name in _pinned_requesters(b, key):
        note = f"{name}: created with placement_group_bundle_index={pin.index} (its scheduling_strategy)"
        if note not in node.evidence:
            node.evidence.append(note)
    return True


def _pinned_requesters(b: Builder, key: str) -> list[str]:
    """The pending actors and tasks that asked for a demand node's resources (its `requested by` lines)."""
    return [e[len("requested by "):] for e in b.g.nodes[key].evidence if e.startswith("requested by ")]


def _fits_without_the_stuck(b: Builder, pg: PlacementGroupRow | None, need: dict[str, float], maybe: list[Claim],
                            holders: dict[str, _Held]) -> bool:
    """Whether the request would get room once, besides the holders that may finish, those that
    never will but do not wait for it (idle actors, leaked groups) released theirs - while some
    holders wait for the request itself."""
    stuck = [h for h in holders.values() if not h.frees and not h.cyclic]
    if not stuck or not any(h.cyclic for h in holders.values()):
        return False
    room = capacity_of(b).room_after(maybe + [c for h in stuck for c in h.claims])
    return group_fits(pg.bundles, pg.strategy, room) if pg is not None else fits(need, room)


def _reaches(b: Builder, src: str, dst: str, budget: int = 5000) -> bool:
    """`src` waits, through the graph's edges so far, on `dst`."""
    seen, todo = {src}, [src]
    while todo and budget > 0:
        budget -= 1
        for edge in b.g.out(todo.pop()):
            if edge.dst == dst:
                return True
            if edge.dst not in seen:
                seen.add(edge.dst)
                todo.append(edge.dst)
    return False


def _resolve(b: Builder, claim: Claim, demand: str, never: dict[str, Holder], reserved: str | None,
             creators: dict[str, list[tuple[str, TaskRow]]], mark: bool = True) -> _Held:
    """A holder's graph node and whether it can ever free what it holds (`mark`: an idle or
    leaked holder is marked as the culprit it is; without, only read)."""
    g = b.g
    if claim.kind == "placement_group" and claim.id in creators:
        return _group_held_by_creator(b, claim, demand, creators[claim.id])
    if claim.kind == "placement_group" and claim.id not in never:
        return _group_in_use(b, claim, demand)
    key: str | None = None
    if claim.kind == "actor":
        key = b.actor_node.get(claim.id)
    elif claim.kind == "task":
        task = next((t for t in b.inp.tasks if t.task_id == claim.id and t.state == "RUNNING"), None)
        key = b.by_pid.get(task.worker) if task is not None and task.worker is not None else None
    if key is not None and _reaches(b, key, demand):
        return _Held([claim], key, False, f"{g.nodes[key].state}, waiting for this very request", cyclic=True)
    if claim.id in never and (key is None or g.nodes[key].state == "idle"):
        return _Held([claim], _holder_node(b, never[claim.id], reserved) if mark else key, False,
                     "nothing uses it" if claim.kind == "placement_group" else "idle")
    if key is not None and g.nodes[key].state in ("blocked", "busy", "unknown"):
        node = g.nodes[key]
        calls = ", ".join(sorted({t.name for t in b.running.get(key, [])}))
        doing = f"runs {calls} ({node.state})" if calls else f"{node.state}" + (f", {node.pattern}" if node.pattern else "")
        return _Held([claim], key, True, doing)
    # Not followed (only named): not in the graph (another job's, not dumped), or idle by its
    # stack but young or running a call the State API lists (an idle node would end the chain
    # as if it were the cause).
    return _Held([claim], None, True, _unseen_state(b, claim, key))


def _unseen_state(b: Builder, claim: Claim, key: str | None) -> str:
    """What the State API says a holder is doing whose stack does not decide it (another job's
    process, not dumped; or idle between calls)."""
    calls = sorted({t.name for t in b.inp.tasks if t.actor_id == claim.id and not t.done}) if claim.kind == "actor" else []
    seen = "idle in its stack" if key is not None else "not dumped"
    own = f"job {claim.job_id}" + (", this job" if claim.job_id == b.job_id else "")
    if claim.kind == "actor":
        return (f"runs {', '.join(calls[:3])}" if calls else "between calls") + f"; {own}, {seen}"
    return f"RUNNING; {own}, {seen}"


def _group_in_use(b: Builder, claim: Claim, demand: str) -> _Held:
    """A CREATED group with live users holds its reservation until removed: it frees it no sooner
    than its members finish. Graphed (group → members) when a member's process is in the graph."""
    g = b.g
    gid = claim.id
    members = [b.actor_node[a.actor_id] for a in b.inp.actors
               if a.placement_group_id == gid and a.state == "ALIVE" and a.actor_id in b.actor_node]
    members += [k for t in b.inp.tasks if t.placement_group_id == gid and t.state == "RUNNING" and t.worker
                and (k := b.by_pid.get(t.worker)) is not None]
    members = list(dict.fromkeys(members))
    if not members:
        return _Held([claim], None, True, f"in use by job {claim.job_id}'s actors or tasks")
    cyclic = all(_reaches(b, m, demand) for m in members)
    key = f"pg:{gid}"
    if key not in g.nodes:
        pg = next(p for p in b.inp.placement_groups if p.placement_group_id == gid)
        g.nodes[key] = GNode(key=key, kind="placement_group", name=claim.name, state="blocked",
                             class_name=pg.name or gid[:12],
                             evidence=[f"CREATED, reserves {pg.total} in {len(pg.bundles)} bundle(s); in use by its members"])
    for m in members:
        g.add_edge(key, m, "held-by", f"reserved for {g.nodes[m].label()}, which runs in it (freed when the group is removed)")
    names = ", ".join(g.nodes[m].name for m in members[:3])
    return _Held([claim], key, not cyclic, f"in use by {names}" + (", which wait for this very request" if cyclic else ""),
                 cyclic=cyclic)


def _group_held_by_creator(b: Builder, claim: Claim, demand: str, creators: list[tuple[str, TaskRow]]) -> _Held:
    """A CREATED group nothing was placed in yet, made by a party that is alive and waits: it holds
    the reservation for the work it starts once its wait ends. When every creator waits for this
    very request, each holds what the other needs while it waits (hold-and-wait): a cycle."""
    g = b.g
    gid = claim.id
    pg = next(p for p in b.inp.placement_groups if p.placement_group_id == gid)
    key = f"pg:{gid}"
    cyclic = all(_reaches(b, k, demand) for k, _ in creators)
    if key not in g.nodes:
        g.nodes[key] = GNode(key=key, kind="placement_group", name=claim.name, state="blocked",
                             class_name=pg.name or gid[:12],
                             evidence=[f"CREATED, reserves {describe(pg.total)} in {len(pg.bundles)} bundle(s); nothing "
                                       "placed in it yet, and its creator is alive and waiting: held, not leaked"])
    maybe = "" if len(creators) == 1 else (f" (one of {len(creators)} possible creators: the State API does not name a "
                                           "group's creator, only which calls of its job ran when it was requested)")
    for k, call in creators:
        if any(e.dst == k for e in g.out(key)):
            continue  # met already, from another demand it holds up
        g.add_edge(key, k, "placement-group-hold-and-wait",
                   f"reserved by {g.nodes[k].label()}{maybe}: requested while its call {call.name} ran; it is alive "
                   "and waits while holding it, for the work it starts once that wait ends")
    names = ", ".join(g.nodes[k].label() for k, _ in creators[:3])
    return _Held([claim], key, not cyclic,
                 f"held by its creator {names}" + (", which waits for this very request" if cyclic else ", which waits"),
                 cyclic=cyclic)


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
    if holder.pattern == "data-pool-holds-resources":
        return ("to release it: size the pool to leave CPUs for the operators upstream - fewer CPUs per UDF actor "
                "(map_batches(..., num_cpus=...)) or a smaller pool (concurrency=...); killing Ray Data's own pool "
                "actors is no fix — advice only, this tool changes nothing")
    if holder.kind == "placement_group":
        named = holder.class_name and not holder.name.endswith(holder.id[:12])
        how = (f"ray.util.remove_placement_group(ray.util.get_placement_group({holder.class_name!r})) from its namespace"
               if named else f"ray.util.remove_placement_group on group {holder.id} (`ray list placement-groups`)")
    else:
        how = "ray.kill(<its handle>) (a named actor: ray.get_actor(name, namespace=...))"
    return f"to release it: {how} — advice only, this tool changes nothing"
