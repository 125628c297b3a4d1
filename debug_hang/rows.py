"""State API rows, typed: made once from the raw rows the collection read, used by the analysis
and the renderers (the way Ray's own `util/state/common.py` types them).

The raw dicts stay in `Snapshot` (they are what the State API said, and what the output folder
records); `Rows.of(snapshot)` reads the fields the analysis decides with, tolerating rows of any
Ray 2.x version and older recorded files (a missing field is None, an empty id is None).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from debug_hang.model import ProcessRef
from debug_hang.snapshot import (
    DONE_STATES,
    DRIVER_TASK_PREFIX,
    ActorState,
    PlacementGroupState,
    Snapshot,
    TaskState,
    rank_env,
)

# Ray 2.x task types (common.proto TaskType) and job statuses (JobStatus), as the State API spells them.
TaskType = Literal["NORMAL_TASK", "ACTOR_CREATION_TASK", "ACTOR_TASK", "DRIVER_TASK"]
JobStatus = Literal["PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"]
TERMINAL_JOB_STATES: frozenset[str] = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})


def _id(value: Any) -> str | None:
    return str(value) if value else None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _resources(value: Any) -> dict[str, float]:
    if not isinstance(value, dict):
        return {}
    out: dict[str, float] = {}
    for k, v in value.items():
        amount = _float(v)
        if amount is not None:
            out[str(k)] = amount
    return out


def _labels(value: Any) -> dict[str, str]:
    """A label selector or a node's labels: {key: value} (a selector's value may be `!v`, `in(a,b)`)."""
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items() if v is not None}


@dataclass(frozen=True, slots=True)
class TaskRow:
    """One attempt of a task, actor call or actor creation."""

    task_id: str
    attempt_number: int
    name: str
    state: TaskState
    type: TaskType | None
    job_id: str | None
    actor_id: str | None
    func_or_class_name: str | None
    parent_task_id: str | None
    node_id: str | None
    worker_pid: int | None
    worker_id: str | None
    creation_time_ms: float | None
    start_time_ms: float | None
    end_time_ms: float | None
    required_resources: dict[str, float]
    placement_group_id: str | None
    error_type: str | None
    error_message: str | None
    label_selector: dict[str, str] = field(default_factory=dict)  # the node labels it must be scheduled on

    @classmethod
    def of(cls, row: dict[str, Any]) -> TaskRow:
        pid = _int(row.get("worker_pid"))
        return cls(
            task_id=str(row.get("task_id") or ""), attempt_number=_int(row.get("attempt_number")) or 0,
            name=str(row.get("name") or ""), state=cast(TaskState, str(row.get("state") or "NIL")),
            type=cast(TaskType, row["type"]) if row.get("type") else None,
            job_id=_id(row.get("job_id")), actor_id=_id(row.get("actor_id")),
            func_or_class_name=_id(row.get("func_or_class_name")), parent_task_id=_id(row.get("parent_task_id")),
            node_id=_id(row.get("node_id")), worker_pid=pid if pid else None, worker_id=_id(row.get("worker_id")),
            creation_time_ms=_float(row.get("creation_time_ms")),
            start_time_ms=_float(row.get("start_time_ms")), end_time_ms=_float(row.get("end_time_ms")),
            required_resources=_resources(row.get("required_resources")),
            placement_group_id=_id(row.get("placement_group_id")),
            error_type=_id(row.get("error_type")), error_message=str(row.get("error_message") or "") or None,
            label_selector=_labels(row.get("label_selector")),
        )

    @property
    def key(self) -> tuple[str, int]:
        """A row's identity: its task and attempt (one task id, several attempts when retried)."""
        return self.task_id, self.attempt_number

    @property
    def done(self) -> bool:
        return self.state in DONE_STATES

    @property
    def worker(self) -> ProcessRef | None:
        """The process running this attempt, when the State API names one."""
        return ProcessRef(self.node_id, self.worker_pid) if self.worker_pid else None

    @property
    def label(self) -> str:
        """What the job calls it (the function or class, else the task's name)."""
        return self.func_or_class_name or self.name


@dataclass(frozen=True, slots=True)
class ActorRow:
    actor_id: str
    class_name: str | None
    state: ActorState
    job_id: str | None
    name: str | None  # a named actor's name
    repr_name: str | None
    pid: int | None
    node_id: str | None
    required_resources: dict[str, float]
    death_cause: dict[str, Any] | None
    num_restarts: int | None  # None: this Ray does not report restarts (2.9)
    num_restarts_due_to_node_preemption: int
    is_detached: bool
    placement_group_id: str | None
    rank_env: dict[str, str]
    label_selector: dict[str, str] = field(default_factory=dict)  # the node labels it must be scheduled on

    @classmethod
    def of(cls, row: dict[str, Any]) -> ActorRow:
        pid = _int(row.get("pid"))
        cause = row.get("death_cause")
        return cls(
            actor_id=str(row.get("actor_id") or ""), class_name=_id(row.get("class_name")),
            state=cast(ActorState, str(row.get("state") or "")), job_id=_id(row.get("job_id")),
            name=_id(row.get("name")), repr_name=_id(row.get("repr_name")), pid=pid if pid else None,
            node_id=_id(row.get("node_id")), required_resources=_resources(row.get("required_resources")),
            death_cause=cause if isinstance(cause, dict) else None, num_restarts=_int(row.get("num_restarts")),
            num_restarts_due_to_node_preemption=_int(row.get("num_restarts_due_to_node_preemption")) or 0,
            is_detached=bool(row.get("is_detached")), placement_group_id=_id(row.get("placement_group_id")),
            rank_env=rank_env(row), label_selector=_labels(row.get("label_selector")),
        )


@dataclass(frozen=True, slots=True)
class JobRow:
    job_id: str | None
    submission_id: str | None
    status: JobStatus | None
    entrypoint: str
    message: str | None
    driver_pid: int | None
    driver_node_id: str | None
    start_time: float | None
    working_dir_uri: str | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> JobRow:
        driver = row.get("driver_info") if isinstance(row.get("driver_info"), dict) else {}
        env = row.get("runtime_env") if isinstance(row.get("runtime_env"), dict) else {}
        pid = _int((driver or {}).get("pid"))
        return cls(
            job_id=_id(row.get("job_id")), submission_id=_id(row.get("submission_id")),
            status=cast(JobStatus, row["status"]) if row.get("status") else None,
            entrypoint=str(row.get("entrypoint") or ""), message=_id(row.get("message")),
            driver_pid=pid if pid else None, driver_node_id=_id(row.get("driver_node_id")),
            start_time=_float(row.get("start_time")), working_dir_uri=_id((env or {}).get("working_dir")),
        )

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL_JOB_STATES

    @property
    def driver_task_id(self) -> str:
        """The id Ray gives the driver's own task: the parent of every call the driver makes."""
        return DRIVER_TASK_PREFIX + str(self.job_id)


@dataclass(frozen=True, slots=True)
class PlacementGroupRow:
    placement_group_id: str
    name: str | None
    state: PlacementGroupState
    creator_job_id: str | None
    bundles: tuple[dict[str, float], ...]  # each bundle's unit_resources
    bundle_nodes: tuple[str | None, ...]  # the node each bundle is reserved on (None while unplaced)
    scheduling_state: str | None
    created_ns: str | None  # stats.creation_request_received_ns
    strategy: str | None
    is_detached: bool

    @classmethod
    def of(cls, row: dict[str, Any]) -> PlacementGroupRow:
        stats = row.get("stats") if isinstance(row.get("stats"), dict) else {}
        return cls(
            placement_group_id=str(row.get("placement_group_id") or ""), name=_id(row.get("name")),
            state=cast(PlacementGroupState, str(row.get("state") or "")), creator_job_id=_id(row.get("creator_job_id")),
            bundles=tuple(_resources(b.get("unit_resources")) for b in row.get("bundles") or [] if isinstance(b, dict)),
            bundle_nodes=tuple(_id(b.get("node_id")) for b in row.get("bundles") or [] if isinstance(b, dict)),
            scheduling_state=_id((stats or {}).get("scheduling_state")),
            created_ns=_id((stats or {}).get("creation_request_received_ns")),
            strategy=_id(row.get("strategy")), is_detached=bool(row.get("is_detached")),
        )

    @property
    def total(self) -> dict[str, float]:
        """What all its bundles reserve together."""
        total: dict[str, float] = {}
        for bundle in self.bundles:
            for k, v in bundle.items():
                total[k] = total.get(k, 0.0) + v
        return total


@dataclass(frozen=True, slots=True)
class NodeRow:
    node_id: str
    state: str
    resources_total: dict[str, float]

    @classmethod
    def of(cls, row: dict[str, Any]) -> NodeRow:
        return cls(node_id=str(row.get("node_id") or ""), state=str(row.get("state") or ""),
                   resources_total=_resources(row.get("resources_total")))


def tasks_of(rows: Iterable[dict[str, Any]]) -> list[TaskRow]:
    return [TaskRow.of(r) for r in rows]


@dataclass
class Rows:
    """Every State API list of one snapshot, typed."""

    jobs: list[JobRow] = field(default_factory=list)
    nodes: list[NodeRow] = field(default_factory=list)
    actors: list[ActorRow] = field(default_factory=list)
    tasks: list[TaskRow] = field(default_factory=list)
    placement_groups: list[PlacementGroupRow] = field(default_factory=list)

    @classmethod
    def of(cls, snap: Snapshot) -> Rows:
        return cls(jobs=[JobRow.of(j) for j in snap.jobs], nodes=[NodeRow.of(n) for n in snap.nodes],
                   actors=[ActorRow.of(a) for a in snap.actors], tasks=tasks_of(snap.tasks),
                   placement_groups=[PlacementGroupRow.of(p) for p in snap.placement_groups])

    def job(self, job_id: str | None) -> JobRow | None:
        return next((j for j in self.jobs if j.job_id == job_id), None)


def calls_into_other_jobs(job_id: str | None, tasks: list[TaskRow]) -> list[TaskRow]:
    """Unfinished calls the job made into actors of other jobs (a detached service: a parameter
    server, a replay buffer). Ray files such a call under the actor's job, with the caller as parent."""
    own = {t.task_id for t in tasks if t.job_id == job_id} | {DRIVER_TASK_PREFIX + str(job_id)}
    return [t for t in tasks if t.job_id != job_id and t.parent_task_id in own and t.actor_id and not t.done]


def actor_of_task(task_id: str | None) -> str | None:
    """The actor a task ran on, read from its id alone: Ray's TaskID is 8 unique bytes followed by
    the ActorID (src/ray/common/id.h), whose 12 unique bytes are all 0xff for a task that is not an
    actor's. A call's parent_task_id thus names the actor that made it even when the parent has no
    task row of its own (a Ray Serve request: Serve turns its task events off)."""
    if not task_id or len(task_id) != 48:
        return None
    actor = task_id[16:].lower()
    return None if actor[:24] == "f" * 24 else actor
