"""Could an unmet resource demand ever be met, and by whose release? Pure functions over State API
rows and the autoscaler's load report (`ray status`'s numbers).

A demand draws from a pool: the cluster's nodes, or, for work scheduled into a placement group,
that group's bundles (Ray names their resources CPU_group_<i>_<id> and CPU_group_<id>). What holds
part of a pool is a claim, as the State API shows it:
- an ALIVE actor holds its required_resources for its whole life, busy or not;
- a RUNNING normal task holds its own, except that one blocked in ray.get / ray.wait hands its
  CPUs back until it returns (its other resources it keeps) - observed with Ray 2.60;
- a CREATED placement group holds its bundles, on their nodes, until it is removed; the actors
  and tasks inside it draw from the group, not from the cluster.
The load report gives what is used and free on each node. A demand is placed when one node has
room for it (every bundle, for a group); it can be placed later only if releasing the claims that
may end leaves room; when even that leaves none, the claims that never end (idle holders, leaked
groups, holders waiting for the demand itself) keep it waiting forever. Resource names are
compared without underscores and case: the load report camel-cases them (CPU_group_0_<id> is
CPUGroup0<Id> there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from debug_hang.rows import ActorRow, PlacementGroupRow, TaskRow

EPS = 1e-6
GROUP_RESOURCE = re.compile(r"_group_(?:(\d+)_)?([0-9a-f]{16,})$")

Room = dict[str, dict[str, float]]  # node id -> {normalised resource name: amount}
ClaimKind = Literal["actor", "task", "placement_group", "unlisted"]


def norm(name: str) -> str:
    """A resource name as both the State API and the load report can be matched on."""
    return name.replace("_", "").lower()


def group_of(resources: Iterable[str]) -> str | None:
    """The placement group whose bundle resources these names are (None: the cluster's own)."""
    for name in resources:
        match = GROUP_RESOURCE.search(name)
        if match:
            return match.group(2)
    return None


def amount_text(resource: str, value: float) -> str:
    """A resource amount as people write it: memory in GiB, the rest as numbers."""
    if resource in ("memory", "object_store_memory") and value >= 2**20:
        return f"{value / 2**30:g} GiB"
    return f"{value:g}"


def describe(resources: dict[str, float], amount: Callable[[str, float], str] | None = None) -> str:
    """Resources as people write them: `{CPU: 1}`, `{memory: 3.5 GiB}`; those of a placement
    group's bundles by their own names, with the group (`{CPU: 1} of placement group
    03bfb6a66a89, bundle 0`)."""
    show = amount or amount_text
    plain: dict[str, float] = {}
    where: set[tuple[str | None, str]] = set()
    # A request pinned to bundle i names each resource twice, CPU_group_i_<id> and the group's
    # wildcard CPU_group_<id>, for the same amount: counted once, as the bundle's.
    indexed = {(name[: m.start()], m.group(2)) for name in resources
               if (m := GROUP_RESOURCE.search(name)) is not None and m.group(1) is not None}
    for name, value in resources.items():
        match = GROUP_RESOURCE.search(name)
        if match is None:
            plain[name] = plain.get(name, 0.0) + value
            continue
        where.add((match.group(1), match.group(2)))
        base = name[: match.start()]
        if match.group(1) is None and (base, match.group(2)) in indexed:
            continue
        if base != "bundle":
            plain[base] = plain.get(base, 0.0) + value
    text = "{" + ", ".join(f"{k}: {show(k, v)}" for k, v in sorted(plain.items())) + "}"
    if where:
        index, gid = sorted(where, key=lambda w: (w[0] is not None, w))[-1]
        text += f" of placement group {gid[:12]}" + (f", bundle {index}" if index is not None else "")
    return text


def positive(resources: dict[str, float]) -> dict[str, float]:
    return {k: float(v) for k, v in resources.items() if float(v) > EPS}


@dataclass(frozen=True)
class Claim:
    """Resources one holder takes from a pool, on one node."""

    kind: ClaimKind
    id: str  # actor id, task id, placement group id ("" for what no row accounts for)
    name: str
    node_id: str | None
    held: dict[str, float]  # in Ray's own names
    job_id: str | None
    pool: str | None  # the placement group it draws from; None: the cluster
    since_ms: float | None = None  # when it was placed (its creation task or itself started), if known

    def holds_any(self, wanted: Iterable[str]) -> bool:
        mine = {norm(k) for k, v in self.held.items() if v > EPS}
        return any(norm(w) in mine for w in wanted)

    def text(self, wanted: Iterable[str] | None = None) -> str:
        keys = {norm(w) for w in wanted} if wanted is not None else None
        return describe({k: v for k, v in self.held.items() if keys is None or norm(k) in keys})


@dataclass
class Capacity:
    """What every node has and has free, the groups' bundles included."""

    totals: Room  # node id -> capacity (normalised names); groups' bundle resources on their nodes
    free: Room | None  # node id -> free now, from the load report; None when it is missing
    used: Room = field(default_factory=dict)

    @classmethod
    def of(cls, node_totals: list[dict[str, float]], usage_by_node: dict[str, dict[str, tuple[float, float]]],
           available: dict[str, float] | None, groups: list[PlacementGroupRow]) -> Capacity:
        if usage_by_node:
            totals = {n: {norm(k): t for k, (_u, t) in res.items()} for n, res in usage_by_node.items()}
            free: Room | None = {n: {norm(k): max(t - u, 0.0) for k, (u, t) in res.items()} for n, res in usage_by_node.items()}
            used = {n: {norm(k): u for k, (u, _t) in res.items()} for n, res in usage_by_node.items()}
        else:
            # No per-node report (an older capture): the node totals, and the cluster's free
            # resources as if on one node (a group's or a fragmented cluster's room is not known).
            totals = {f"node{i}": {norm(k): v for k, v in t.items()} for i, t in enumerate(node_totals)}
            free = {"cluster": {norm(k): v for k, v in available.items()}} if available is not None else None
            used = {}
        for pg in groups:
            if pg.state != "CREATED":
                continue
            for node, extra in bundle_resources(pg).items():
                into = totals.setdefault(node or "unplaced", {})
                for k, v in extra.items():
                    into.setdefault(k, v)  # the load report's own figure wins
        return cls(totals=totals, free=free, used=used)

    def feasible(self, need: dict[str, float]) -> bool:
        """Some node could hold it if it were empty."""
        return fits(need, self.totals)

    def placeable_now(self, need: dict[str, float]) -> bool:
        """Some node has room for it now (unknown free resources count as none)."""
        return self.free is not None and fits(need, self.free)

    def room_after(self, released: list[Claim]) -> Room:
        """Free resources per node once the given claims are released."""
        room = {n: dict(r) for n, r in (self.free or {}).items()}
        for claim in released:
            node = room.setdefault((claim.node_id or "cluster") if self.used else "cluster", {})
            for k, v in claim.held.items():
                node[norm(k)] = node.get(norm(k), 0.0) + v
        return room

    def unlisted(self, claims: list[Claim], wanted: Iterable[str]) -> list[Claim]:
        """What the load report counts as used on a node that no claim accounts for (a holder the
        State API listing does not show, cut or lagging): pseudo-claims, to be counted as ones
        that may end (nothing is known of them)."""
        out: list[Claim] = []
        keys = {norm(w) for w in wanted}
        # Holders whose row names no node (an actor still being created) run on some node: they
        # account for usage wherever some is unexplained.
        nodeless = {key: sum(v for c in claims if c.node_id is None for k, v in c.held.items() if norm(k) == key)
                    for key in keys}
        for node, used in self.used.items():
            held: dict[str, float] = {}
            for key in keys:
                listed = sum(v for c in claims if c.node_id == node for k, v in c.held.items() if norm(k) == key)
                taken = min(nodeless[key], max(0.0, used.get(key, 0.0) - listed))
                nodeless[key] -= taken
                if used.get(key, 0.0) - listed - taken > 0.01:
                    held[key] = used[key] - listed - taken
            if held:
                out.append(Claim(kind="unlisted", id="", name="holders not in the State API listing", node_id=node,
                                 held=held, job_id=None, pool=None))
        return out


def fits(need: dict[str, float], room: Room) -> bool:
    """One node has at least `need` of every resource."""
    wanted = {norm(k): v for k, v in need.items() if v > EPS}
    return any(all(r.get(k, 0.0) + EPS >= v for k, v in wanted.items()) for r in room.values())


def group_fits(bundles: tuple[dict[str, float], ...], strategy: str | None, room: Room) -> bool:
    """Every bundle of a group finds room: all on one node for STRICT_PACK, on distinct nodes for
    STRICT_SPREAD, anywhere otherwise (placed largest first, room taken as it goes)."""
    if strategy == "STRICT_PACK":
        total: dict[str, float] = {}
        for b in bundles:
            for k, v in b.items():
                total[k] = total.get(k, 0.0) + v
        return fits(total, room)
    left = {n: dict(r) for n, r in room.items()}
    used_nodes: set[str] = set()
    for bundle in sorted(bundles, key=lambda b: -sum(b.values())):
        wanted = {norm(k): v for k, v in bundle.items() if v > EPS}
        node = next((n for n, r in left.items() if (strategy != "STRICT_SPREAD" or n not in used_nodes)
                     and all(r.get(k, 0.0) + EPS >= v for k, v in wanted.items())), None)
        if node is None:
            return False
        used_nodes.add(node)
        for k, v in wanted.items():
            left[node][k] -= v
    return True


def bundle_resources(pg: PlacementGroupRow) -> dict[str | None, dict[str, float]]:
    """The resources a CREATED group's bundles make on their nodes, in Ray's names (normalised):
    CPU_group_<i>_<id> per bundle and CPU_group_<id> summed per node (bundle_group_* likewise)."""
    out: dict[str | None, dict[str, float]] = {}
    gid = pg.placement_group_id
    for i, bundle in enumerate(pg.bundles):
        node = pg.bundle_nodes[i] if i < len(pg.bundle_nodes) else None
        into = out.setdefault(node, {})
        for k, v in [*bundle.items(), ("bundle", 1000.0)]:
            into[norm(f"{k}_group_{i}_{gid}")] = v
            into[norm(f"{k}_group_{gid}")] = into.get(norm(f"{k}_group_{gid}"), 0.0) + v
    return out


def claims(actors: list[ActorRow], tasks: list[TaskRow], groups: list[PlacementGroupRow],
           cpu_released: set[str]) -> list[Claim]:
    """Everything that holds resources now: ALIVE actors (and those being created whose process
    runs), RUNNING tasks (no CPU for those in `cpu_released`: blocked in ray.get), CREATED
    placement groups (per node of their bundles)."""
    out: list[Claim] = []
    created_at: dict[str, float] = {}
    # an actor being created (its __init__ runs) holds what it asked for; an ALIVE one is counted
    # as an actor, a DEAD one's creation task may still read RUNNING (its owner died with it)
    creating_actors = {a.actor_id for a in actors if a.state in ("PENDING_CREATION", "RESTARTING")}
    for task in tasks:
        placed = task.start_time_ms or task.creation_time_ms
        if task.type == "ACTOR_CREATION_TASK" and task.actor_id and placed:
            created_at[task.actor_id] = max(created_at.get(task.actor_id, 0.0), placed)
    # an actor being created whose process runs (it has a pid) while no RUNNING creation-task row
    # says so (Ray Serve turns its replicas' task events off) holds what it asked for as well
    creating_rows = {t.actor_id for t in tasks if t.type == "ACTOR_CREATION_TASK" and t.state == "RUNNING"}
    for actor in actors:
        held = positive(actor.required_resources)
        # (a RESTARTING actor's pid is its dead process's)
        running_unlisted = actor.state == "PENDING_CREATION" and actor.pid is not None and actor.actor_id not in creating_rows
        if not (actor.state == "ALIVE" or running_unlisted) or not held:
            continue
        out.append(Claim(kind="actor", id=actor.actor_id, name=str(actor.name or actor.class_name), node_id=actor.node_id,
                         held=held, job_id=actor.job_id, pool=actor.placement_group_id or group_of(held),
                         since_ms=created_at.get(actor.actor_id)))
    for task in tasks:
        creating = task.type == "ACTOR_CREATION_TASK" and task.actor_id in creating_actors  # __init__ running
        if task.state != "RUNNING" or not (task.type == "NORMAL_TASK" or creating):
            continue
        held = positive(task.required_resources)
        if task.task_id in cpu_released:
            held = {k: v for k, v in held.items() if norm(k) != "cpu" and not norm(k).startswith("cpugroup")}
        if held:
            out.append(Claim(kind="task", id=task.task_id, name=task.label, node_id=task.node_id, held=held,
                             job_id=task.job_id, pool=task.placement_group_id or group_of(held),
                             since_ms=task.start_time_ms or task.creation_time_ms))
    for pg in groups:
        if pg.state != "CREATED":
            continue
        by_node: dict[str | None, dict[str, float]] = {}
        for i, bundle in enumerate(pg.bundles):
            node = pg.bundle_nodes[i] if i < len(pg.bundle_nodes) else None
            into = by_node.setdefault(node, {})
            for k, v in bundle.items():
                into[k] = into.get(k, 0.0) + v
        stamp = pg.created_ns or ""
        created = int(stamp) / 1e6 if stamp.isdigit() else None
        for node, held in by_node.items():
            out.append(Claim(kind="placement_group", id=pg.placement_group_id,
                             name=f"placement group {pg.name or pg.placement_group_id[:12]}", node_id=node,
                             held=positive(held), job_id=pg.creator_job_id, pool=None, since_ms=created))
    return out


@dataclass(frozen=True)
class Pin:
    """A request pinned to one bundle of a group (placement_group_bundle_index=index): what it
    asks of that bundle, by plain resource name."""

    group: str
    index: int
    need: dict[str, float]  # {"CPU": 1.0}: the bundle's own resources, wildcard and bundle_* left out


def pin_of(request: dict[str, float]) -> Pin | None:
    """The bundle a request is pinned to: its names carry one bundle index (CPU_group_<i>_<id>);
    None for a request to any bundle (CPU_group_<id> only) or to the cluster."""
    found: set[tuple[int, str]] = set()
    need: dict[str, float] = {}
    for name, value in request.items():
        match = GROUP_RESOURCE.search(name)
        if match is None or match.group(1) is None or float(value) <= EPS:
            continue
        found.add((int(match.group(1)), match.group(2)))
        base = name[: match.start()]
        if base != "bundle":
            need[base] = need.get(base, 0.0) + float(value)
    if len(found) != 1 or not need:
        return None
    index, gid = found.pop()
    return Pin(group=gid, index=index, need=need)


def bundles_with_room(pin: Pin, pg: PlacementGroupRow, cap: Capacity, held: list[Claim]) -> list[tuple[int, dict[str, float]]]:
    """The other bundles of the pin's (CREATED) group that have room for its request now, each with
    what it has free: the bundle's size less what the claims pinned to it hold, within what the
    group as a whole has left (a member placed by the wildcard takes from some bundle the State API
    does not name), and no more than the load report's CPU_group_<j>_<id> free, when it has one
    (either reading may lag the other: the smaller counts)."""
    gid = pg.placement_group_id
    out: list[tuple[int, dict[str, float]]] = []
    members = [c for c in held if c.pool == gid]
    for j, bundle in enumerate(pg.bundles):
        if j == pin.index or any(bundle.get(r, 0.0) + EPS < v for r, v in pin.need.items()):
            continue
        room: dict[str, float] = {}
        for r in pin.need:
            mine = sum(v for c in members for k, v in c.held.items() if norm(k) == norm(f"{r}_group_{j}_{gid}"))
            anyone = sum(v for c in members for k, v in c.held.items() if norm(k) == norm(f"{r}_group_{gid}"))
            room[r] = max(0.0, min(bundle.get(r, 0.0) - mine, sum(b.get(r, 0.0) for b in pg.bundles) - anyone))
            if cap.free is not None and cap.used:
                reported = max((free.get(norm(f"{r}_group_{j}_{gid}"), 0.0) for free in cap.free.values()), default=0.0)
                room[r] = min(room[r], reported)
        if all(room[r] + EPS >= v for r, v in pin.need.items()):
            out.append((j, room))
    return out
