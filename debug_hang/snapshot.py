"""What the State API said, and pure facts read from its rows (no I/O).

`Snapshot` holds the raw rows of one reading of the head (jobs, nodes, actors, tasks, placement
groups, events, cluster status); the helpers here answer questions about them that both the
collection and the analysis ask. Ray's state names are typed here once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

# Ray 2.x task states (common.proto TaskStatus), actor states (ActorTableData.ActorState) and
# placement group states (PlacementGroupTableData.PlacementGroupState), as the State API spells them.
TaskState = Literal[
    "NIL", "PENDING_ARGS_AVAIL", "PENDING_NODE_ASSIGNMENT", "PENDING_OBJ_STORE_MEM_AVAIL",
    "PENDING_ARGS_FETCH", "SUBMITTED_TO_WORKER", "PENDING_ACTOR_TASK_ARGS_FETCH",
    "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY", "RUNNING", "RUNNING_IN_RAY_GET",
    "RUNNING_IN_RAY_WAIT", "FINISHED", "FAILED", "GETTING_AND_PINNING_ARGS",
]
ActorState = Literal["DEPENDENCIES_UNREADY", "PENDING_CREATION", "ALIVE", "RESTARTING", "DEAD"]
PlacementGroupState = Literal["PENDING", "PREPARED", "CREATED", "REMOVED", "RESCHEDULING"]

DONE_STATES: tuple[TaskState, ...] = ("FINISHED", "FAILED")
DRIVER_TASK_PREFIX = "f" * 40  # a driver's task id is 40 f's + its job id

# Ray Train (V2) names: the controller, the workers, the ray.train.report barrier and the calls
# its controller makes on a timer whether the job moves or not (not progress).
CONTROLLER_CLASS = "TrainController"
WORKER_CLASS = "RayTrainWorker"
# One RUNNING call per rank that reached a barrier every rank must join (ray.train.report).
BARRIER_TASK = "SynchronizationActor.broadcast_from_rank_zero"
# Calls Ray's libraries make on a timer whether the job moves or not.
POLLING_TASKS = frozenset({
    "RayTrainWorker.poll_status",
    # Ray Data's autoscaling coordinator (ray/data/_internal/cluster_autoscaler/
    # default_autoscaling_coordinator.py), called on a timer by Ray Train V2 and Ray Data.
    "_AutoscalingCoordinatorActor.request_resources",
    "_AutoscalingCoordinatorActor.get_reserved_resources",
    "_AutoscalingCoordinatorActor.cancel_request",
    # Ray Data's stats actor, sent by the streaming executor's loop on every round, stuck or not,
    # and never waited on (ray/data/_internal/stats.py, _StatsManager.update_execution_metrics).
    "_StatsActor.update_execution_metrics",
    # Ray Data's actor-pool operators ask the location tracker where their actors are on every
    # scheduling round (ray/data/_internal/utils/cached_ray_internals.py, a 1 s cache), stuck or not.
    "ActorLocationTracker.get_actor_locations",
})
# The actor behind ray.util.queue.Queue: its waits are followed to the queue's producers/consumers.
QUEUE_ACTOR_CLASS = "_QueueActor"

# Environment variables that say which rank a process is: the only ones ever kept.
RANK_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")
# Row fields that hold a job's or an actor's whole environment (secrets live there): written only
# with --include-runtime-env; an actor keeps its rank variables as `rank_env`.
RUNTIME_ENV_FIELDS = ("runtime_env", "metadata", "serialized_runtime_env", "runtime_env_info")
OTHER_JOB_FIELDS = ("job_id", "submission_id", "status", "entrypoint")
ENTRYPOINT_HEAD = 80  # characters of another job's entrypoint that are written


@dataclass
class Snapshot:
    """Everything read from the head, raw (as the API returns it) and timestamped."""

    dashboard_url: str
    taken_at: float
    jobs: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    actors: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    placement_groups: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    cluster_status: dict[str, Any] = field(default_factory=dict)
    cluster_status_text: str | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Lists the State API cut or Ray dropped events of: {list: {returned, total[, matched][, events_dropped]}}.
    truncated: dict[str, dict[str, int]] = field(default_factory=dict)
    # What Ray's libraries said of themselves (collect/libraries.py): {"serve": [readings],
    # "data": [readings, first and after the window], "errors": [...]}; empty when none runs.
    libraries: dict[str, Any] = field(default_factory=dict)
    # Ray and Python of the cluster and of the diagnosing side (collect/versions.py): {"cluster": {"ray",
    # "python"} or {"error"}, "tool": {"ray", "python", "cloudpickle"}}; empty in older captures.
    versions: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dashboard_url": self.dashboard_url,
            "taken_at": self.taken_at,
            "jobs": self.jobs,
            "nodes": self.nodes,
            "actors": self.actors,
            "tasks": self.tasks,
            "placement_groups": self.placement_groups,
            "events": self.events,
            "cluster_status": self.cluster_status,
            "cluster_status_text": self.cluster_status_text,
            "warnings": self.warnings,
            "errors": self.errors,
            "truncated": self.truncated,
            "libraries": self.libraries,
            "versions": self.versions,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**fields)


def calls_into_other_jobs(job_id: str | None, tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Unfinished calls the job made into actors of other jobs (a detached service: a parameter
    server, a replay buffer). Ray files such a call under the actor's job, with the caller as parent."""
    own = {t.get("task_id") for t in tasks if t.get("job_id") == job_id} | {DRIVER_TASK_PREFIX + str(job_id)}
    return [t for t in tasks if t.get("job_id") != job_id and t.get("parent_task_id") in own
            and t.get("actor_id") and t.get("state") not in DONE_STATES]


def running_jobs(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Jobs with status RUNNING, newest first."""
    running = [j for j in jobs if j.get("status") == "RUNNING"]
    return sorted(running, key=lambda j: j.get("start_time") or 0, reverse=True)


def resource_usage(snap: Snapshot) -> dict[str, tuple[float, float]]:
    """{resource: (used, total)} from the autoscaler's load report (`ray status`'s numbers)."""
    usage = (snap.cluster_status.get("loadMetricsReport") or {}).get("usage") or {}
    out: dict[str, tuple[float, float]] = {}
    for key, pair in usage.items():
        if isinstance(pair, list) and len(pair) == 2:
            out[key] = (float(pair[0]), float(pair[1]))
    return out


def usage_by_node(snap: Snapshot) -> dict[str, dict[str, tuple[float, float]]]:
    """{node_id: {resource: (used, total)}} from the autoscaler's load report, per node (names as
    the report spells them: camel-cased, `CPUGroup0<Id>` for CPU_group_0_<id>)."""
    nodes = (snap.cluster_status.get("loadMetricsReport") or {}).get("usageByNode") or {}
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for node_id, usage in nodes.items() if isinstance(nodes, dict) else ():
        if isinstance(usage, dict):
            out[str(node_id)] = {k: (float(p[0]), float(p[1])) for k, p in usage.items()
                                 if isinstance(p, list) and len(p) == 2}
    return out


def node_totals(snap: Snapshot) -> list[dict[str, float]]:
    """resources_total of every alive node."""
    return [dict(n.get("resources_total") or {}) for n in snap.nodes if n.get("state") == "ALIVE"]


def node_labels(snap: Snapshot) -> list[dict[str, str]] | None:
    """The labels of every alive node; None when a node row carries no `labels` (an older Ray or capture)."""
    alive = [n for n in snap.nodes if n.get("state") == "ALIVE"]
    if not alive or any(not isinstance(n.get("labels"), dict) for n in alive):
        return None
    return [{str(k): str(v) for k, v in n["labels"].items()} for n in alive]


# The autoscaler report camel-cases resource names; map the usual ones back.
_USAGE_NAMES = {"objectStoreMemory": "object_store_memory"}


def available_resources(snap: Snapshot) -> dict[str, float] | None:
    """Cluster-wide free resources {name: total - used}, or None when the report is missing."""
    usage = resource_usage(snap)
    if not usage:
        return None
    return {_USAGE_NAMES.get(k, k): total - used for k, (used, total) in usage.items()}


def rank_env(actor: dict[str, Any]) -> dict[str, str]:
    """The rank variables of an actor's runtime_env env_vars (`rank_env` once written)."""
    if isinstance(actor.get("rank_env"), dict):
        return {str(k): str(v) for k, v in actor["rank_env"].items()}
    try:
        env = (json.loads(actor.get("serialized_runtime_env") or "{}") or {}).get("env_vars") or {}
    except (TypeError, ValueError, AttributeError):
        return {}
    return {k: str(env[k]) for k in RANK_VARS if isinstance(env, dict) and k in env}


# What is kept of another job's actor or task that holds resources (a pending demand of the
# diagnosed job may wait for it): who it is and what it holds, nothing of its environment.
HOLDER_ACTOR_FIELDS = ("actor_id", "class_name", "state", "job_id", "name", "pid", "node_id", "required_resources",
                       "is_detached", "placement_group_id", "num_restarts")
HOLDER_TASK_FIELDS = ("task_id", "attempt_number", "name", "state", "type", "job_id", "actor_id", "func_or_class_name",
                      "parent_task_id", "node_id", "worker_pid", "start_time_ms", "end_time_ms", "creation_time_ms",
                      "required_resources", "placement_group_id")


def other_holders(snap: Snapshot, job_id: str, kept_actors: set[Any], kept_tasks: set[tuple[Any, Any]]
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Other jobs' ALIVE actors and RUNNING tasks that hold resources, and the unfinished calls on
    those actors (whether anything uses them), in HOLDER_*_FIELDS only: what the diagnosis weighed
    when a demand waited for resources, so that the saved folder re-analyses to the same answer."""
    def holds(row: dict[str, Any]) -> bool:
        return any(isinstance(v, int | float) and v > 0 for v in (row.get("required_resources") or {}).values())

    actors = [{k: a.get(k) for k in HOLDER_ACTOR_FIELDS} for a in snap.actors
              if a.get("job_id") != job_id and a.get("actor_id") not in kept_actors and a.get("state") == "ALIVE" and holds(a)]
    ids = {a["actor_id"] for a in actors}
    tasks = [{k: t.get(k) for k in HOLDER_TASK_FIELDS} for t in snap.tasks
             if t.get("job_id") != job_id and (t.get("task_id"), t.get("attempt_number")) not in kept_tasks
             and t.get("state") not in DONE_STATES
             and (t.get("actor_id") in ids or (t.get("state") == "RUNNING" and holds(t)))]
    return actors, tasks


def public_rows(snap: Snapshot, job_id: str | None, include_runtime_env: bool = False,
                named: frozenset[str] = frozenset()) -> Snapshot:
    """What of a snapshot is written: the diagnosed job's rows (and the other jobs' actors it
    calls or the diagnosis names, `named`: actor ids), other jobs as id, status and entrypoint
    head; runtime_env, metadata, serialized_runtime_env and runtime_env_info dropped unless
    `include_runtime_env`."""
    foreign = calls_into_other_jobs(job_id, snap.tasks)
    called = {t.get("actor_id") for t in foreign}

    def strip(row: dict[str, Any]) -> dict[str, Any]:
        if include_runtime_env:
            return row
        out = {k: v for k, v in row.items() if k not in RUNTIME_ENV_FIELDS}
        ranks = rank_env(row) if "serialized_runtime_env" in row or "rank_env" in row else {}
        if ranks:
            out["rank_env"] = ranks
        return out

    jobs = [strip(j) if j.get("job_id") == job_id or job_id is None else
            {k: (str(j.get(k) or "")[:ENTRYPOINT_HEAD] if k == "entrypoint" else j.get(k)) for k in OTHER_JOB_FIELDS}
            for j in snap.jobs]
    actors = [strip(a) for a in snap.actors if job_id is None or a.get("job_id") == job_id or a.get("actor_id") in called]
    kept = {a.get("actor_id") for a in actors}
    actors += [{k: a.get(k) for k in HOLDER_ACTOR_FIELDS} for a in snap.actors
               if a.get("actor_id") in named and a.get("actor_id") not in kept]
    tasks = [strip(t) for t in [*(t for t in snap.tasks if job_id is None or t.get("job_id") == job_id), *foreign]]
    if job_id is not None:
        more_actors, more_tasks = other_holders(snap, job_id, {a.get("actor_id") for a in actors},
                                                 {(t.get("task_id"), t.get("attempt_number")) for t in tasks})
        actors += more_actors
        tasks += more_tasks
    return Snapshot(**{**snap.__dict__, "jobs": jobs, "actors": actors, "tasks": tasks})
