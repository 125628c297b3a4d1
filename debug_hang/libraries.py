"""What Ray's libraries said about themselves, typed once (no I/O): Ray Serve's applications,
deployments and replicas (the Serve controller's state), Ray Data's running datasets and their
operators (the dashboard's Ray Data endpoint, read twice), and the Serve metrics read on each node.

The collection stores the readings raw under `Snapshot.libraries` and `Collection.library_metrics`
(what the dashboard and the nodes said, in the output folder); `LibraryState.of(...)` reads the
fields the analysis decides with, tolerating missing ones (an older Ray, a failed read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Ray Serve's controller (ray/serve/_private/constants.py SERVE_CONTROLLER_NAME, SERVE_NAMESPACE)
# and Ray Data's stats actor (ray/data/_internal/stats.py STATS_ACTOR_NAME, STATS_ACTOR_NAMESPACE):
# the dashboard's Serve and Data endpoints ask these actors. The Data endpoint *creates* its actor
# when there is none (get_or_create_stats_actor), so it is read only when the actor already lives.
SERVE_CONTROLLER = ("SERVE_CONTROLLER_ACTOR", "serve")
DATA_STATS_ACTOR = ("datasets_stats_actor", "_dataset_stats_actor")

# The Serve metric families read on each node (ray/serve/_private/replica.py, router.py): requests
# in flight at a replica, a caller's requests in flight at a deployment's replicas and queued at its
# handle, and the requests each replica has finished.
SERVE_METRICS = (
    "ray_serve_replica_processing_queries",
    "ray_serve_num_ongoing_requests_at_replicas",
    "ray_serve_deployment_queued_queries",
    "ray_serve_deployment_request_counter_total",
)
# Labels kept of each sample (Ray's WorkerId names the process that exported it; a router's
# actor_id the calling actor, "DRIVER" for a driver).
SERVE_LABELS = ("WorkerId", "actor_id", "application", "deployment", "handle", "route")
# A replica's request log line (ray/serve/_private/logging_utils.py access log): one per finished
# request, "... <replica> <request id> -- CALL score OK 3.5ms" (HTTP: "GET / 200 3.5ms").
ACCESS_LINE = re.compile(r" -- \S+ \S+ (?:OK|ERROR|CANCELLED|\d{3}) [\d.]+ms\s*$")
# Ray's library packages: code of these lives in Ray, not in the job (their classes, threads and
# calls are Ray's machinery). Ray core (ray/_private, ray/actor.py, ...) is not a library.
LIBRARY_FILE = re.compile(r"(^|/)ray/(data|serve|train|tune|air|rllib|llm|workflow)/")
DATA_FILE = re.compile(r"(^|/)ray/data/")


@dataclass(frozen=True, slots=True)
class Replica:
    app: str
    deployment: str
    replica_id: str
    actor_id: str | None
    actor_name: str | None
    node_id: str | None
    pid: int | None
    worker_id: str | None
    state: str
    log_file_path: str | None  # relative to the node's session log folder: /serve/replica_<app>_<dep>_<id>.log

    @property
    def class_name(self) -> str:
        """The replica actor's class, as the State API names it."""
        return f"ServeReplica:{self.app}:{self.deployment}"


@dataclass(frozen=True, slots=True)
class Deployment:
    app: str
    name: str
    status: str
    message: str
    max_ongoing_requests: int | None
    replicas: tuple[Replica, ...]
    target_num_replicas: int | None = None
    max_replicas: int | None = None  # the most it may have (autoscaler bound or fixed num_replicas); None: not read

    @property
    def label(self) -> str:
        return f"{self.app}/{self.name}"


@dataclass(frozen=True, slots=True)
class Operator:
    operator: str  # the executor's id of it (name + "_<index>")
    name: str
    state: str
    progress: int | None  # blocks it has output
    total: int | None
    queued_blocks: int | None


@dataclass(frozen=True, slots=True)
class Dataset:
    dataset: str
    job_id: str | None
    state: str
    progress: int | None
    total: int | None
    operators: tuple[Operator, ...]


@dataclass(frozen=True, slots=True)
class MetricSample:
    name: str
    labels: dict[str, str]
    value: float
    node_id: str | None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _str(value: Any) -> str:
    return str(value) if value is not None else ""


def deployments_of(raw: dict[str, Any] | None) -> list[Deployment]:
    """The deployments (and their replicas) of a Serve reading (`serve_reading`'s form)."""
    out: list[Deployment] = []
    for app_name, app in ((raw or {}).get("applications") or {}).items():
        if not isinstance(app, dict):
            continue
        for dep_name, dep in (app.get("deployments") or {}).items():
            if not isinstance(dep, dict):
                continue
            replicas = tuple(Replica(
                app=str(app_name), deployment=str(dep_name), replica_id=_str(r.get("replica_id")),
                actor_id=r.get("actor_id") or None, actor_name=r.get("actor_name") or None,
                node_id=r.get("node_id") or None, pid=_int(r.get("pid")), worker_id=r.get("worker_id") or None,
                state=_str(r.get("state")), log_file_path=r.get("log_file_path") or None)
                for r in dep.get("replicas") or [] if isinstance(r, dict))
            out.append(Deployment(app=str(app_name), name=str(dep_name), status=_str(dep.get("status")),
                                  message=_str(dep.get("message"))[:300],
                                  max_ongoing_requests=_int(dep.get("max_ongoing_requests")), replicas=replicas,
                                  target_num_replicas=_int(dep.get("target_num_replicas")),
                                  max_replicas=_int(dep.get("max_replicas"))))
    return out


def datasets_of(raw: dict[str, Any] | None) -> list[Dataset]:
    """The datasets of one Ray Data reading (`data_reading`'s form)."""
    out: list[Dataset] = []
    for ds in (raw or {}).get("datasets") or []:
        if not isinstance(ds, dict):
            continue
        ops = tuple(Operator(operator=_str(o.get("operator")), name=_str(o.get("name") or o.get("operator")),
                             state=_str(o.get("state")), progress=_int(o.get("progress")), total=_int(o.get("total")),
                             queued_blocks=_int(o.get("queued_blocks")))
                    for o in ds.get("operators") or [] if isinstance(o, dict))
        out.append(Dataset(dataset=_str(ds.get("dataset")), job_id=ds.get("job_id") or None, state=_str(ds.get("state")),
                           progress=_int(ds.get("progress")), total=_int(ds.get("total")), operators=ops))
    return out


# The class name Ray Data gives the actors of an operator's pool (map_batches with a callable class).
_POOL_ACTOR_CLASS = re.compile(r"^MapWorker\((.+)\)$")


@dataclass
class LibraryState:
    """Ray Serve's and Ray Data's state as read for one diagnosis (empty when neither is in use)."""

    deployments: list[Deployment] = field(default_factory=list)
    serve_read: bool = False  # the Serve controller's state was read
    datasets: list[Dataset] = field(default_factory=list)  # the first Ray Data reading
    datasets_after: list[Dataset] | None = None  # the second, after the sampling window
    data_window_s: float | None = None
    metrics: list[MetricSample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, raw: dict[str, Any] | None, metrics: dict[str, Any] | None = None) -> LibraryState:
        raw = raw or {}
        serve = [r for r in raw.get("serve") or [] if isinstance(r, dict)]
        data = [r for r in raw.get("data") or [] if isinstance(r, dict)]
        state = cls(deployments=deployments_of(serve[-1]) if serve else [], serve_read=bool(serve),
                    datasets=datasets_of(data[0]) if data else [],
                    datasets_after=datasets_of(data[-1]) if len(data) > 1 else None,
                    errors=[str(e) for e in raw.get("errors") or []])
        if len(data) > 1:
            try:
                state.data_window_s = float(data[-1]["read_at"]) - float(data[0]["read_at"])
            except (KeyError, TypeError, ValueError):
                state.data_window_s = None
        for node_id, node in (metrics or {}).items():
            for s in (node or {}).get("samples") or []:
                try:
                    state.metrics.append(MetricSample(name=str(s["name"]), value=float(s["value"]), node_id=node_id,
                                                      labels={str(k): str(v) for k, v in (s.get("labels") or {}).items()}))
                except (KeyError, TypeError, ValueError):
                    continue
        return state

    @property
    def replicas(self) -> list[Replica]:
        return [r for d in self.deployments for r in d.replicas]

    def replica_of_actor(self, actor_id: str | None) -> Replica | None:
        return next((r for r in self.replicas if actor_id and r.actor_id == actor_id), None)

    def deployment_of(self, replica: Replica) -> Deployment | None:
        return next((d for d in self.deployments if d.app == replica.app and d.name == replica.deployment), None)

    def pool_operator(self, class_name: str | None, job_id: str | None) -> tuple[Dataset, Operator] | None:
        """The Ray Data operator whose actor pool an actor belongs to: Ray Data names each pool
        actor's class `MapWorker(<operator name>)` (ray/data/_internal/execution/operators/
        actor_pool_map_operator.py), and that operator is listed for an unfinished dataset of the
        actor's job. None for any other actor (a class merely named so, with no such operator)."""
        m = _POOL_ACTOR_CLASS.match(class_name or "")
        if m is None:
            return None
        for ds in (self.datasets_after or []) + self.datasets:
            if ds.state == "FINISHED" or (job_id and ds.job_id and ds.job_id != job_id):
                continue
            op = next((o for o in ds.operators if o.name == m.group(1)), None)
            if op is not None:
                return ds, op
        return None

    def samples(self, name: str) -> list[MetricSample]:
        return [s for s in self.metrics if s.name == name]

    def in_flight_at(self, replica: Replica) -> float | None:
        """Requests the replica is processing (its own gauge), None when not read."""
        found = [s.value for s in self.samples("ray_serve_replica_processing_queries")
                 if replica.worker_id and s.labels.get("WorkerId") == replica.worker_id]
        return max(found) if found else None
