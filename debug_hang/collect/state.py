"""A snapshot of the cluster from the dashboard's HTTP API: the State API and the Job API.

Plain JSON over HTTP with a timeout per request — the same endpoints `ray list` and the State
SDK call, without 0.8 s of CLI start-up per call and without silent truncation: every list
records `total` and how many rows came back, and a gap is reported in `warnings`.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from debug_hang.errors import UnreachableError
from debug_hang.snapshot import Snapshot

# One State API request lists at most this many rows; Ray's server caps a response at
# RAY_MAX_LIMIT_FROM_API_SERVER (10,000 by default), so asking for more is pointless.
LIST_LIMIT = 10_000
# A State API list is served in well under a second on a healthy head; 10 s covers a loaded one.
HTTP_TIMEOUT_S = 10.0


@dataclass
class ListResult:
    """Rows of one State API list and how complete they are."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    total: int | None = None
    error: str | None = None

    @property
    def truncated(self) -> bool:
        return self.total is not None and self.total > len(self.rows)


class DashboardClient:
    """GET JSON from the dashboard with a timeout; errors become UnreachableError."""

    def __init__(self, url: str, timeout_s: float = HTTP_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def get(self, path: str, params: list[tuple[str, str]] | None = None,
            timeout_s: float | None = None) -> Any:
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        request = urllib.request.Request(self.url + path + query, headers={"Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s or self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = _error_message(exc)
            raise UnreachableError(f"dashboard {self.url}{path} answered HTTP {exc.code}"
                                   + (f": {detail}" if detail else "")) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UnreachableError(f"dashboard {self.url} did not answer {path}: {reason}") from None
        try:
            return json.loads(body)
        except json.JSONDecodeError:
            raise UnreachableError(f"dashboard {self.url}{path} returned non-JSON") from None

    def log_file(self, params: list[tuple[str, str]], lines: int) -> str:
        """The last `lines` of one Ray log file, read on its node by the dashboard agent
        (`/api/v0/logs/file`; params name it: actor_id or node_id + pid or filename, suffix)."""
        query = urllib.parse.urlencode([*params, ("lines", str(lines)), ("timeout", "5")])
        try:
            with urllib.request.urlopen(f"{self.url}/api/v0/logs/file?{query}", timeout=self.timeout_s) as response:
                return str(response.read().decode("utf-8", "replace"))
        except OSError as exc:
            raise UnreachableError(f"log not readable: {getattr(exc, 'reason', exc)}") from None

    def list_state(self, resource: str, filters: list[tuple[str, str, str]] | None = None,
                   detail: bool = True, timeout_s: float | None = None) -> ListResult:
        """One State API list (`/api/v0/<resource>`), never raising: errors go in the result."""
        params = [("limit", str(LIST_LIMIT)), ("detail", "1" if detail else "0"),
                  ("timeout", str(int(timeout_s or self.timeout_s)))]
        for key, predicate, value in filters or []:
            params += [("filter_keys", key), ("filter_predicates", predicate), ("filter_values", value)]
        try:
            body = self.get(f"/api/v0/{resource}", params, timeout_s)
        except UnreachableError as exc:
            cap = _LIMIT_CAP.search(str(exc))
            if not cap:
                return ListResult(error=str(exc))
            # The head runs with a lower RAY_MAX_LIMIT_FROM_API_SERVER: ask for exactly that.
            params[0] = ("limit", cap.group(1))
            try:
                body = self.get(f"/api/v0/{resource}", params, timeout_s)
            except UnreachableError as again:
                return ListResult(error=str(again))
        if not body.get("result", False):
            return ListResult(error=f"State API {resource}: {body.get('msg', 'failed')[:300]}")
        data = body.get("data", {}).get("result", {})
        result = ListResult(rows=list(data.get("result") or []), total=data.get("total"))
        if data.get("partial_failure_warning"):
            result.error = f"State API {resource} partial: {data['partial_failure_warning'][:300]}"
        return result


_LIMIT_CAP = re.compile(r"exceeds the supported limit (\d+)")


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The `msg` of a dashboard error response, or its first line."""
    try:
        raw = exc.read().decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        return str(json.loads(raw).get("msg", ""))[:300].strip()
    except (ValueError, AttributeError):
        return raw.strip().splitlines()[0][:300] if raw.strip() else ""


def take_snapshot(dashboard_url: str, job_id: str | None, timeout_s: float = HTTP_TIMEOUT_S) -> Snapshot:
    """Read jobs, nodes, the job's actors and tasks, placement groups, events and cluster status.

    The requests run in parallel; a failed one is recorded in `errors`, the rest still count.
    Without `job_id`, actors and tasks of every job are read (the caller picks the job later).
    """
    client = DashboardClient(dashboard_url, timeout_s)
    job_filter = [("job_id", "=", job_id)] if job_id else []
    requests: dict[str, Any] = {
        "jobs": lambda: client.get("/api/jobs/"),
        "nodes": lambda: client.list_state("nodes"),
        "actors": lambda: client.list_state("actors", job_filter),
        "tasks": lambda: client.list_state("tasks", job_filter),
        "placement_groups": lambda: client.list_state("placement_groups"),
        "events": lambda: client.list_state("cluster_events"),
        "cluster_status": lambda: client.get("/api/cluster_status"),
        "cluster_status_text": lambda: client.get("/api/cluster_status", [("format", "1")]),
    }
    snap = Snapshot(dashboard_url=dashboard_url, taken_at=time.time())
    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        futures = {name: pool.submit(fn) for name, fn in requests.items()}
        for name, future in futures.items():
            try:
                value = future.result(timeout=timeout_s + 2)
            except UnreachableError as exc:
                snap.errors.append(str(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - one failed request must not stop the rest
                snap.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            _store(snap, name, value)
    return snap


def _store(snap: Snapshot, name: str, value: Any) -> None:
    if isinstance(value, ListResult):
        if value.error:
            # Cluster events only add context: their loss is a warning, not a collection error.
            optional = name == "events" or bool(value.rows)
            (snap.warnings if optional else snap.errors).append(value.error)
        if value.truncated:
            snap.warnings.append(
                f"{name}: the State API returned {len(value.rows)} of {value.total} rows; "
                "the rest are missing from this diagnosis (filter by job, or raise "
                "RAY_MAX_LIMIT_FROM_API_SERVER on the head)"
            )
        setattr(snap, name, value.rows)
    elif name == "jobs":
        snap.jobs = list(value) if isinstance(value, list) else []
    elif name == "cluster_status":
        snap.cluster_status = (value or {}).get("data", {}).get("clusterStatus") or {}
    elif name == "cluster_status_text":
        snap.cluster_status_text = (value or {}).get("data", {}).get("clusterStatus")
