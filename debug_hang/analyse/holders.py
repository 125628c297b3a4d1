"""Who holds the resources a pending demand needs: pure functions over State API rows.

A task, actor or placement group that is feasible on this cluster but not placed waits for
resources someone else holds. The holders that nothing uses are the usual cause, and the State
API shows them: a placement group CREATED with no live actor and no unfinished task in it (its
trial ended, its actors were killed, `remove_placement_group` was never called), an ALIVE actor
with CPUs or GPUs and no task running or queued on it (an idle actor, often a detached one whose
job ended). Blocked holders (actors that keep their CPUs while in `ray.get`) are the starvation
the wait-for graph already follows. Nothing here reads a class or group name to decide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.rows import ActorRow, JobRow, PlacementGroupRow, TaskRow

# Resource names internal to placement groups (CPU_group_<i>_<id>, bundle_group_<id>): what an
# actor inside a group takes from the group's reservation, not from the cluster.
_GROUP_RESOURCE = re.compile(r"_group_")
_STATUS_RESERVED = re.compile(r".*reserved in placement groups.*")


@dataclass
class Holder:
    """A placement group or actor that holds resources and that nothing uses now."""

    kind: str  # placement_group | actor
    id: str
    name: str
    pattern: PatternId  # catalog id of the finding
    job_id: str | None
    class_name: str | None
    held: dict[str, float]
    age_s: float | None  # since it was created (group) or last did something (actor)
    node_id: str | None = None
    pid: int | None = None
    used: bool = False  # a group that had actors or tasks (now all gone), not one never used yet
    orphaned: bool = False  # a group requested by a task attempt that has since failed
    evidence: list[str] = field(default_factory=list)

    def holds_any(self, wanted: set[str]) -> bool:
        return any(self.held.get(r, 0.0) > 0 for r in wanted)

    def held_text(self, wanted: set[str] | None = None) -> str:
        shown = {k: v for k, v in sorted(self.held.items()) if wanted is None or k in wanted}
        return "{" + ", ".join(f"{k}: {v:g}" for k, v in shown.items()) + "}"


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "an unknown time"
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def _creator(job_id: str | None, jobs: dict[str, JobRow]) -> str:
    job = jobs.get(job_id or "")
    if job is None:
        return f"job {job_id}"
    entry = job.entrypoint.strip()[:80]
    return f"job {job_id}" + (f" (`{entry}`, {job.status})" if entry else f" ({job.status})")


def reaped_by_ray(row: ActorRow | PlacementGroupRow, job_id: str | None, jobs: dict[str, JobRow]) -> bool:
    """True for a non-detached actor or group whose job has ended: Ray removes those itself (a
    moment after the job ends), so they are not leaks — only detached ones outlive their job."""
    job = jobs.get(str(job_id))
    return not row.is_detached and job is not None and job.ended


def _by_group(rows: list[ActorRow] | list[TaskRow]) -> dict[str, list[ActorRow | TaskRow]]:
    """Actor or task rows by the placement group they are placed in (one pass, any job)."""
    out: dict[str, list[ActorRow | TaskRow]] = {}
    for row in rows:
        if row.placement_group_id:
            out.setdefault(row.placement_group_id, []).append(row)
    return out


def _reserved_usage(pg_id: str, usage: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
    """{resource: (used, reserved)} of one group, from the autoscaler's load report, whose keys are
    camel-cased Ray group resources (`CPUGroup<Id>` for CPU_group_<id>)."""
    out: dict[str, tuple[float, float]] = {}
    suffix = f"group{pg_id.lower()}"
    for key, pair in usage.items():
        low = key.lower()
        if low.endswith(suffix) and not low.startswith("bundle"):
            name = key[: len(key) - len(suffix)]
            if name and not name[-1].isdigit():
                out[name] = pair
    return out


def leaked_placement_groups(pgs: list[PlacementGroupRow], actors: list[ActorRow], tasks: list[TaskRow],
                            jobs: dict[str, JobRow], now_s: float,
                            usage: dict[str, tuple[float, float]] | None = None) -> list[Holder]:
    """CREATED groups with no live user: no actor in them that is not DEAD, no unfinished task."""
    found: list[Holder] = []
    actors_in, tasks_in = _by_group(actors), _by_group(tasks)
    for pg in pgs:
        if pg.state != "CREATED" or reaped_by_ray(pg, pg.creator_job_id, jobs):
            continue
        pg_id = pg.placement_group_id
        members = [a for a in actors_in.get(pg_id, []) if isinstance(a, ActorRow)]
        pg_tasks = [t for t in tasks_in.get(pg_id, []) if isinstance(t, TaskRow)]
        live = [a for a in members if a.state != "DEAD"]
        # A dead actor's calls (its creation task too) can stay RUNNING or PENDING in the State API
        # when their owner died with it (no final event arrives): they run nothing.
        dead = {a.actor_id for a in actors if a.state == "DEAD"}
        busy = [t for t in pg_tasks if not t.done and t.actor_id not in dead]
        if live or busy:
            continue
        created = pg.created_ns or ""
        age = now_s - int(created) / 1e9 if created.isdigit() and int(created) > 0 else None
        classes = sorted({a.class_name for a in members if a.class_name})
        name = pg.name or pg_id[:12]
        creator = _failed_attempt_creating(pg, tasks)
        holder = Holder(kind="placement_group", id=pg_id, name=f"placement group {name}",
                        pattern="placement-group-leaked", job_id=pg.creator_job_id,
                        # an unnamed group is known by the code that made it, when that is known
                        class_name=pg.name or (creator[0].label if creator else name), held=pg.total, age_s=age,
                        used=bool(members or pg_tasks), orphaned=creator is not None)
        holder.evidence.append(
            f"CREATED {_ago(age)} ago by {_creator(pg.creator_job_id, jobs)}"
            + (", detached" if pg.is_detached else "")
            + f"; reserves {holder.held_text()} in {len(pg.bundles)} bundle(s)")
        ended = [t.end_time_ms or 0 for t in pg_tasks]
        if members:
            reasons = sorted({str(((a.death_cause or {}).get("actor_died_error_context") or {}).get("reason")
                                  or "dead") for a in members})
            holder.evidence.append(
                f"no live user: its {len(members)} actor(s) ({', '.join(classes)}) are DEAD ({', '.join(reasons)})"
                + (f", the last task in it ended {_ago(now_s - max(ended) / 1000.0)} ago" if any(ended) else "")
                + "; nothing removed the group (ray.util.remove_placement_group)")
        else:
            holder.evidence.append("no live user: no actor or task was ever placed in it; nothing removed it")
        for res, (used, reserved) in sorted(_reserved_usage(pg_id, usage or {}).items()):
            holder.evidence.append(f"{used:g} {res} used of {reserved:g} reserved in it (the autoscaler's load report)")
        if creator is not None:
            holder.evidence.append(creator[1])
        found.append(holder)
    return found


def live_creators(pg: PlacementGroupRow, tasks: list[TaskRow], actors: list[ActorRow]) -> list[TaskRow]:
    """The calls of the group's job that were running when the group was requested and whose
    party is still alive: an actor's call (finished or not) on an ALIVE actor, or a task still
    RUNNING. The State API does not name a group's creator; one of these made it, and a group
    lives until removed or its job ends, so a live creator may still use what it reserved."""
    stamp = pg.created_ns or ""
    if not stamp.isdigit() or int(stamp) <= 0:
        return []
    made = int(stamp) / 1e6
    alive = {a.actor_id for a in actors if a.state == "ALIVE"}
    return [t for t in tasks if t.job_id == pg.creator_job_id and t.start_time_ms and t.start_time_ms <= made
            and t.state in ("RUNNING", "FINISHED") and (t.end_time_ms is None or made <= t.end_time_ms)
            and (t.actor_id in alive if t.actor_id else t.state == "RUNNING")]


def _failed_attempt_creating(pg: PlacementGroupRow, tasks: list[TaskRow]) -> tuple[TaskRow, str] | None:
    """A task attempt of the group's job that was running when the group was requested and then
    FAILED: the group is probably its leftover. A group outlives the worker that created it (it
    lives until its job ends or it is removed), so each retry of that task reserves another."""
    stamp = pg.created_ns or ""
    if not stamp.isdigit():
        return None
    made = int(stamp) / 1e6
    for t in tasks:
        # A worker lost within a second of starting never reports RUNNING (its task events are
        # flushed once a second): no start time, only the owner's creation time, before it.
        began = t.start_time_ms or t.creation_time_ms
        if (t.job_id == pg.creator_job_id and t.state == "FAILED" and began and t.end_time_ms
                and began <= made <= t.end_time_ms):
            retried = [r for r in tasks if r.task_id == t.task_id and r.attempt_number > t.attempt_number and not r.done]
            return t, (f"requested while attempt {t.attempt_number} of {t.label} ran, which then FAILED ({t.error_type}) "
                    f"{(t.end_time_ms - made) / 1000.0:.1f} s later: probably its leftover (a group outlives the worker "
                    "that created it)" + (f"; {t.label} is being retried (attempt {retried[0].attempt_number}, "
                                          f"{retried[0].state}) and asks again" if retried else ""))
    return None


def plain_resources(required: dict[str, float] | None) -> dict[str, float]:
    """An actor's resources taken from the cluster itself (not from a placement group's bundles)."""
    return {k: float(v) for k, v in (required or {}).items()
            if not _GROUP_RESOURCE.search(k) and float(v) > 0 and k not in ("memory", "object_store_memory")}


def group_resources(required: dict[str, float] | None) -> dict[str, float]:
    """An actor's resources taken from its placement group's bundles (CPU_group_<i>_<id>, ...)."""
    return {k: float(v) for k, v in (required or {}).items()
            if _GROUP_RESOURCE.search(k) and not k.startswith("bundle_group_") and float(v) > 0}


def idle_actors(actors: list[ActorRow], tasks: list[TaskRow], jobs: dict[str, JobRow],
                now_s: float) -> list[Holder]:
    """ALIVE actors holding cluster resources that nothing uses: no task running or waiting on
    them, except calls made by jobs that have ended (nobody waits for those results)."""
    active: set[str] = set()
    orphaned: dict[str, list[TaskRow]] = {}
    last_end: dict[str, float] = {}
    for task in tasks:
        aid = task.actor_id
        if not aid:
            continue
        if not task.done:
            caller = jobs.get(caller_job(task) or "")
            if caller is not None and caller.ended:
                orphaned.setdefault(aid, []).append(task)
            else:
                active.add(aid)
        else:
            last_end[aid] = max(last_end.get(aid, 0.0), task.end_time_ms or 0.0)
    found: list[Holder] = []
    for actor in actors:
        aid = actor.actor_id
        # What it takes from the cluster, or, placed in a group, from the group's bundles.
        held = plain_resources(actor.required_resources) or group_resources(actor.required_resources)
        if actor.state != "ALIVE" or aid in active or not held or reaped_by_ray(actor, actor.job_id, jobs):
            continue
        idle_for = now_s - last_end[aid] / 1000.0 if last_end.get(aid) else None
        job = jobs.get(str(actor.job_id) or "")
        label = actor.name or actor.class_name
        holder = Holder(kind="actor", id=aid, name=str(label), pattern="idle-actor-holds-resources",
                        job_id=actor.job_id, class_name=actor.class_name, held=held,
                        age_s=idle_for, node_id=actor.node_id, pid=actor.pid)
        holder.evidence.append(
            f"ALIVE, holds {holder.held_text()}, no task running or queued on it"
            + (f"; its last call ended {_ago(idle_for)} ago" if idle_for is not None else "; no call finished on it")
            + f"; created by {_creator(actor.job_id, jobs)}")
        calls = orphaned.get(aid, [])
        if calls:
            holder.evidence[-1] = holder.evidence[-1].replace("no task running or queued on it",
                                                              "no call of a live job running or queued on it")
            ended = caller_job(calls[0])
            holder.evidence.append(f"{', '.join(sorted({t.name for t in calls}))} {calls[0].state} on it "
                                   f"for job {ended}, which has ended ({jobs[str(ended)].status}): nobody "
                                   "waits for that result")
        if actor.is_detached and job is not None and job.status != "RUNNING":
            holder.evidence.append(f"detached (lifetime='detached') and its job is {job.status}: it outlives "
                                   "its job and keeps its resources until killed")
        found.append(holder)
    return found


def caller_job(task: TaskRow) -> str | None:
    """The job that made a call: a Ray task id ends with its job id (8 hex digits), so does the
    parent task id of a call (a driver's is 40 f's + its job id)."""
    parent = task.parent_task_id or ""
    return parent[-8:] if len(parent) >= 16 else None


def status_reserved_line(status_text: str | None) -> str | None:
    """`ray status`'s line "0.0/4.0 CPU (0.0 used of 3.0 reserved in placement groups)", if any."""
    for line in (status_text or "").splitlines():
        if _STATUS_RESERVED.match(line):
            return line.strip()
    return None
