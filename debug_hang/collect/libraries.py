"""Ray's libraries' own state, read from the dashboard (bounded, read-only): Ray Serve's
applications, deployments and replicas (`/api/serve/applications/`, the Serve controller's
state) and Ray Data's running datasets with their operators' progress (`/api/data/datasets/<job>`).

Both endpoints ask an actor of the library; each is asked only when that actor is ALIVE in the
State API's actor list (the Data endpoint would otherwise *create* Ray Data's stats actor: not
read-only). Each reading keeps the fields the analysis decides with (no runtime_env, no user
config: they can hold secrets) and when it was taken; a failed read is an error line, never raised.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from typing import Any

from debug_hang.collect.stacks import Target
from debug_hang.collect.state import DashboardClient
from debug_hang.errors import UnreachableError
from debug_hang.libraries import DATA_STATS_ACTOR, SERVE_CONTROLLER, deployments_of
from debug_hang.snapshot import Snapshot

# A library endpoint answers through its actor: a few seconds at most, or the actor is stuck too.
READ_TIMEOUT_S = 5.0
MAX_REPLICAS = 256  # replicas kept of one reading (a big fleet is read by its first few hundred)
MAX_FOREIGN_REPLICAS = 32  # other jobs' replicas dumped at most (a shared service the job may call)
MAX_DATASETS = 16
MAX_OPERATORS = 64
MAX_TEXT = 300


def _alive(actors: list[dict[str, Any]], name_ns: tuple[str, str]) -> bool:
    name, namespace = name_ns
    return any(a.get("name") == name and a.get("state") == "ALIVE"
               and (a.get("ray_namespace") in (None, namespace)) for a in actors)


def serve_reading(client: DashboardClient, actors: list[dict[str, Any]], timeout_s: float = READ_TIMEOUT_S) -> dict[str, Any] | None:
    """The Serve controller's applications, deployments and replicas, compact; None when Serve
    does not run. Raises UnreachableError when the dashboard or the controller does not answer."""
    if not _alive(actors, SERVE_CONTROLLER):
        return None
    body = client.get("/api/serve/applications/", timeout_s=timeout_s)
    if not isinstance(body, dict):
        raise UnreachableError("the Serve endpoint returned no object")
    return serve_compact(body, time.time())


def serve_compact(body: dict[str, Any], read_at: float) -> dict[str, Any]:
    """What is kept of one `/api/serve/applications/` answer (no configs: they can hold secrets)."""
    apps: dict[str, Any] = {}
    kept = 0
    for app_name, app in (body.get("applications") or {}).items():
        if not isinstance(app, dict):
            continue
        deps: dict[str, Any] = {}
        for dep_name, dep in (app.get("deployments") or {}).items():
            if not isinstance(dep, dict):
                continue
            config = dep.get("deployment_config") if isinstance(dep.get("deployment_config"), dict) else {}
            replicas = []
            for r in dep.get("replicas") or []:
                if isinstance(r, dict) and kept < MAX_REPLICAS:
                    kept += 1
                    replicas.append({k: r.get(k) for k in ("replica_id", "actor_id", "actor_name", "node_id", "pid",
                                                           "worker_id", "state", "log_file_path", "start_time_s")})
            deps[str(dep_name)] = {"status": dep.get("status"), "message": str(dep.get("message") or "")[:MAX_TEXT],
                                   "max_ongoing_requests": (config or {}).get("max_ongoing_requests"),
                                   "target_num_replicas": dep.get("target_num_replicas"),
                                   "max_replicas": _max_replicas(config or {}), "replicas": replicas}
        apps[str(app_name)] = {"status": app.get("status"), "message": str(app.get("message") or "")[:MAX_TEXT],
                               "deployments": deps}
    controller = body.get("controller_info") if isinstance(body.get("controller_info"), dict) else {}
    return {"read_at": read_at, "applications": apps,
            "controller": {k: (controller or {}).get(k) for k in ("actor_id", "node_id", "log_file_path")}}


def _max_replicas(config: dict[str, Any]) -> int | None:
    """The most replicas the deployment may have: its autoscaler's max_replicas, else its fixed
    num_replicas (None when the config says neither)."""
    scaling = config.get("autoscaling_config")
    value = scaling.get("max_replicas") if isinstance(scaling, dict) else config.get("num_replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def data_reading(client: DashboardClient, job_id: str, actors: list[dict[str, Any]],
                 timeout_s: float = READ_TIMEOUT_S) -> dict[str, Any] | None:
    """The job's datasets and their operators' progress, compact; None when Ray Data's stats actor
    does not exist (nothing to read, and asking would create it). Raises UnreachableError."""
    if not _alive(actors, DATA_STATS_ACTOR):
        return None
    body = client.get(f"/api/data/datasets/{urllib.parse.quote(job_id, safe='')}", timeout_s=timeout_s)
    if not isinstance(body, dict):
        raise UnreachableError("the Ray Data endpoint returned no object")
    return data_compact(body, time.time())


def data_compact(body: dict[str, Any], read_at: float) -> dict[str, Any]:
    """What is kept of one `/api/data/datasets/<job>` answer: datasets and their operators' progress."""
    datasets = []
    for ds in (body.get("datasets") or [])[:MAX_DATASETS]:
        if not isinstance(ds, dict):
            continue
        ops = [{k: o.get(k) for k in ("operator", "name", "state", "progress", "total", "queued_blocks")}
               for o in (ds.get("operators") or [])[:MAX_OPERATORS] if isinstance(o, dict)]
        datasets.append({**{k: ds.get(k) for k in ("dataset", "job_id", "state", "progress", "total", "start_time",
                                                   "end_time")}, "operators": ops})
    return {"read_at": read_at, "datasets": datasets}


def replica_targets(reading: dict[str, Any] | None, known: list[Target], limit: int = MAX_FOREIGN_REPLICAS) -> list[Target]:
    """Serve replicas to dump besides the job's own processes: a deployment is a service other
    jobs call (its replicas may belong to another job); each RUNNING replica with a pid, at most
    `limit` (the job's own replicas are among its actors already)."""
    have = {t.ref for t in known}
    out: list[Target] = []
    for dep in deployments_of(reading):
        for r in dep.replicas:
            if len(out) >= limit:
                return out
            if r.pid and r.pid > 0 and r.node_id and r.state == "RUNNING":
                target = Target(pid=r.pid, node_id=r.node_id, role="actor", job_id=None, actor_id=r.actor_id,
                                actor_class=r.class_name, actor_name=r.actor_name)
                if target.ref not in have:
                    have.add(target.ref)
                    out.append(target)
    return out


class LibraryReader:
    """The library readings of one diagnosis, taken in a daemon thread each (the Data endpoint
    takes a second or two under load) and joined with a bound; `store` writes them into the
    snapshot (`Snapshot.libraries`: {"serve": [...], "data": [...], "errors": [...]})."""

    def __init__(self, dashboard_url: str, job_id: str, actors: list[dict[str, Any]]) -> None:
        self.url, self.job_id, self.actors = dashboard_url, job_id, actors
        self.serve: list[dict[str, Any]] = []
        self.data: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._threads: list[tuple[threading.Thread, float]] = []  # each reading and when it times out

    def read_serve(self, timeout_s: float) -> dict[str, Any] | None:
        """The Serve reading, now (the targets depend on it)."""
        try:
            reading = serve_reading(DashboardClient(self.url, timeout_s), self.actors, timeout_s)
        except UnreachableError as exc:
            self.errors.append(f"Ray Serve state not read: {exc}")
            return None
        if reading is not None:
            self.serve.append(reading)
        return reading

    def start_data(self, timeout_s: float) -> None:
        """Start one Ray Data reading in the background (first: with the snapshot; second: after the window)."""
        def read() -> None:
            try:
                reading = data_reading(DashboardClient(self.url, timeout_s), self.job_id, self.actors, timeout_s)
            except UnreachableError as exc:
                self.errors.append(f"Ray Data state not read: {exc}")
                return
            if reading is not None:
                self.data.append(reading)

        thread = threading.Thread(target=read, name="debug-hang-library-state", daemon=True)
        thread.start()
        self._threads.append((thread, time.monotonic() + timeout_s))

    def join(self, extra_s: float) -> None:
        """Wait for each reading until its own timeout, but at most `extra_s` more from now (a
        reading not back by then is reported, and the diagnosis goes on without it)."""
        end = time.monotonic() + max(0.0, extra_s)
        for thread, own_end in self._threads:
            thread.join(max(0.0, min(end, own_end) - time.monotonic()))
            if thread.is_alive():
                self.errors.append("a library state reading did not answer in time")

    def store(self, snap: Snapshot) -> None:
        data = sorted(self.data, key=lambda r: float(r.get("read_at") or 0.0))
        if self.serve or data or self.errors:
            snap.libraries = {"serve": list(self.serve), "data": data, "errors": list(dict.fromkeys(self.errors))}
