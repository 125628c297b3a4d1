"""A rendezvous for ranks nobody launched: ranks in init_process_group state the world size they wait
for (the torch frames' `world_size` and `rank` locals, kept as facts); when fewer ranks exist, none
can still start and none is elsewhere, the party that created the ranks launched too few."""

from __future__ import annotations

from debug_hang.analyse.graph.builder import Builder
from debug_hang.analyse.graph.threads import deciding_thread
from debug_hang.rows import actor_of_task

# Actor states of an actor that may still become a rank.
_STARTING_ACTORS = frozenset({"PENDING_CREATION", "DEPENDENCIES_UNREADY", "RESTARTING"})


def rendezvous_reading(b: Builder, key: str) -> tuple[int, int] | None:
    """(world_size, rank) a process in a rendezvous states in its torch.distributed frames' locals
    (init_process_group, the rendezvous handlers); None when its dump has no such facts."""
    verdict = b.verdicts.get(key)
    thread = deciding_thread(verdict) if verdict is not None else None
    for frame in thread.frames if thread is not None else []:
        if "torch/distributed/" not in frame.file.replace("\\", "/"):
            continue
        world, rank = (frame.facts or {}).get("world_size"), (frame.facts or {}).get("rank")
        if type(world) is int and type(rank) is int and 0 <= rank < world:
            return world, rank
    return None


def _members(b: Builder) -> dict[str, tuple[int, int]]:
    """Every process of the job in a rendezvous that states its world size and rank, any class, any node."""
    found: dict[str, tuple[int, int]] = {}
    for key, node in b.g.nodes.items():
        reading = rendezvous_reading(b, key) if node.pattern == "rendezvous-wait" else None
        if reading is not None:
            found[key] = reading
    return found


def _still_starting(b: Builder, ranks: list[str]) -> list[str]:
    """What of the job could still become a missing rank: an actor not yet created or restarting, a
    task not yet running, a constructor still running, a busy process (it may start one)."""
    own = {b.g.nodes[k].actor_id for k in ranks} - {None}
    found = [f"actor {a.class_name} {a.state}" for a in b.actors.values()
             if a.job_id == b.job_id and a.state in _STARTING_ACTORS]
    for task in b.tasks:
        if task.job_id != b.job_id or task.done or task.actor_id in own:
            continue
        if not str(task.state).startswith("RUNNING") or task.type == "ACTOR_CREATION_TASK":
            found.append(f"task {task.name} {task.state}")
    found += [n.label() + " busy" for k, n in b.g.nodes.items() if k not in ranks and n.state == "busy"]
    return found


def _creator(b: Builder, ranks: list[str]) -> str | None:
    """The one process that created every rank (an actor's creation task, or a task's parent):
    the driver, or the actor or task whose call made them; None when they differ or are unknown."""
    parents: set[str] = set()
    for key in ranks:
        node = b.g.nodes[key]
        if node.actor_id:
            made = next((t for t in b.index.of_actor(node.actor_id) if t.type == "ACTOR_CREATION_TASK"), None)
        else:
            made = next((t for t in b.tasks if node.task_id and t.task_id == node.task_id), None)
        if made is None or not made.parent_task_id:
            return None
        parents.add(made.parent_task_id)
    if len(parents) != 1:
        return None
    parent = parents.pop()
    found = next((k for k in b.verdicts if parent in b.own_calls(k)), None)
    return found or b.actor_node.get(actor_of_task(parent) or "")


def _reaches(b: Builder, start: str, targets: set[str]) -> bool:
    """Whether `start` waits, directly or through others, on one of `targets`."""
    seen, todo = {start}, [start]
    while todo:
        for e in b.g.out(todo.pop()):
            if e.dst in targets:
                return True
            if e.dst not in seen:
                seen.add(e.dst)
                todo.append(e.dst)
    return False


def _listed(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:-1])) + (" and " if len(numbers) > 1 else "") + str(numbers[-1])


def mark_never_launched(b: Builder, waiting: list[str]) -> bool:
    """Ranks that all wait in one rendezvous (none elsewhere, no member outside the job) for a world
    larger than the ranks that exist: when nothing of the job can still start the missing ones,
    their creator launched too few. It waits on the ranks (a cycle through the launch) or has
    finished: the rank's wait leads to it. True when decided."""
    g = b.g
    members = _members(b)
    if not waiting or any(k not in members for k in waiting):
        return False
    worlds = {members[k][0] for k in waiting}
    world = worlds.pop() if len(worlds) == 1 else None
    group = [k for k, (w, _r) in members.items() if w == world]
    ranks = sorted(r for k, (_w, r) in members.items() if k in group)
    if world is None or len(set(ranks)) != len(ranks) or len(ranks) >= world:
        return False
    missing = sorted(set(range(world)) - set(ranks))
    present = f"world_size {world}, rank{'s' if len(ranks) > 1 else ''} {_listed(ranks)} exist"
    starting = _still_starting(b, group)
    creator = _creator(b, group)
    if starting or creator is None or creator in group:
        why = (f"may still be starting ({', '.join(starting[:3])})" if starting
               else "was not started, by a creator the task rows do not name")
        note = f"in init_process_group: {present}, rank(s) {_listed(missing)} {why}"
        for k in group:
            if note not in g.nodes[k].evidence:
                g.nodes[k].evidence.append(note)
        return False
    maker = g.nodes[creator]
    waits_on_ranks = _reaches(b, creator, set(group))
    if not waits_on_ranks and (g.out(creator) or maker.state == "busy"):
        return False  # it waits on something else, or runs: it may start them later
    for k in group:
        node = g.nodes[k]
        if node.rank is None:
            node.rank = members[k][1]
    said = (f"{present}, rank{'s' if len(missing) > 1 else ''} {_listed(missing)} "
            f"{'were' if len(missing) > 1 else 'was'} never started: {maker.label()} created the {len(group)} "
            f"rank(s) (no actor or task of the job pending, none busy, no member outside the job connected to them)")
    maker.evidence.append(said + (", and waits on them" if waits_on_ranks else ", and runs nothing more"))
    if not waits_on_ranks:
        maker.pattern = "rank-never-launched"
    for k in group:
        frame = g.nodes[k].frame
        g.add_edge(k, creator, "rank-never-launched",
                   f"in {frame.function if frame is not None else 'init_process_group'} for {said}")
    return True
