"""A snapshot of the cluster from the dashboard's HTTP API: the State API and the Job API.

Plain JSON over HTTP with a timeout per request — the same endpoints `ray list` and the State
SDK call, without 0.8 s of CLI start-up per call and without silent truncation: every list
records `total` and how many rows came back, and a gap is reported in `warnings`.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from debug_hang.errors import UnreachableError
from debug_hang.snapshot import Snapshot
from debug_hang.timeouts import Deadline

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
    # Ray's funnel (ListApiResponse): `total` at the source, `after_source` once the source's own
    # limit cut it (tasks: minus the status events Ray dropped), `matched` after the filters.
    after_source: int | None = None
    matched: int | None = None
    events_dropped: int | None = None  # num_status/profile_task_events_dropped, when the API says

    @property
    def cut(self) -> bool:
        """Whether a limit cut this list (the API server's, or the data source's 10,000), as opposed
        to `total` counting task records that Ray dropped (see `infer_task_drops`)."""
        if self.matched is not None and self.matched > len(self.rows):
            return True
        if self.after_source is not None and self.total is not None and self.total > self.after_source:
            return self.after_source >= LIST_LIMIT or not self.events_dropped
        return self.matched is None and self.total is not None and self.total > len(self.rows)

    def infer_task_drops(self) -> None:
        """Task lists: the dashboard folds the GCS's dropped task records (`num_status_task_events
        _dropped`: attempts evicted past RAY_task_events_max_num_task_in_gcs or lost in workers'
        buffers, in the list's scope — the job's with a job filter, else the cluster's) into `total`
        and returns no separate count. Below the source's limit the difference is those drops."""
        if (self.events_dropped is None and self.total is not None and self.after_source is not None
                and self.after_source < LIST_LIMIT and self.total > self.after_source):
            self.events_dropped = self.total - self.after_source

    @property
    def truncated(self) -> bool:
        """Rows exist that this list did not return (cut by a limit, or events dropped by Ray)."""
        if self.events_dropped:
            return True
        if self.matched is not None and self.after_source is not None:
            return self.matched > len(self.rows) or self.total is not None and self.total > self.after_source
        return self.total is not None and self.total > len(self.rows)

    def completeness(self) -> dict[str, int]:
        """{returned, total[, matched][, events_dropped]}: what `collection.truncated` records."""
        out = {"returned": len(self.rows), "total": int(self.total or 0)}
        if self.matched is not None:
            out["matched"] = int(self.matched)
        if self.events_dropped:
            out["events_dropped"] = int(self.events_dropped)
        return out

    @classmethod
    def from_data(cls, data: dict[str, Any], resource: str = "") -> ListResult:
        """A ListResult from the `data.result` object of a State API list response of `resource`."""
        def num(key: str) -> int | None:
            value = data.get(key)
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        dropped = [n for n in (num("num_status_task_events_dropped"), num("num_profile_task_events_dropped"))
                   if n is not None]
        result = cls(rows=list(data.get("result") or []), total=num("total"), after_source=num("num_after_truncation"),
                     matched=num("num_filtered"), events_dropped=sum(dropped) if dropped else None)
        if resource == "tasks":
            result.infer_task_drops()
        return result


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

    def _get_retrying_once(self, path: str, params: list[tuple[str, str]], timeout_s: float | None) -> Any:
        """`get`, asked once more after a short pause when the dashboard answered 5xx at once (a
        handler's transient failure: Ray 2.31's State API answered some listings 500 under CI load)."""
        started = time.monotonic()
        try:
            return self.get(path, params, timeout_s)
        except UnreachableError as exc:
            elapsed = time.monotonic() - started
            if not _SERVER_ERROR.search(str(exc)) or _LIMIT_CAP.search(str(exc)) or elapsed > (timeout_s or self.timeout_s) / 2:
                raise
            time.sleep(RETRY_PAUSE_S)
            return self.get(path, params, timeout_s)

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
            body = self._get_retrying_once(f"/api/v0/{resource}", params, timeout_s)
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
        result = ListResult.from_data(data, resource)
        if data.get("partial_failure_warning"):
            result.error = f"State API {resource} partial: {data['partial_failure_warning'][:300]}"
        return result


_LIMIT_CAP = re.compile(r"exceeds the supported limit (\d+)")
_SERVER_ERROR = re.compile(r"answered HTTP 5\d\d")
RETRY_PAUSE_S = 0.3


def _error_message(exc: urllib.error.HTTPError) -> str:
    """The `msg` of a dashboard error response, or its first line; of a Python traceback (the
    dashboard's handler raised), its last line: the exception, which says what failed."""
    try:
        raw = exc.read().decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        text = str(json.loads(raw).get("msg", "")).strip()
    except (ValueError, AttributeError):
        text = raw.strip().splitlines()[0] if raw.strip() else ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0].startswith("Traceback (most recent call last)"):
        return f"{lines[-1][:300]} (the dashboard's handler raised)"
    return text[:300]


# Without a job id the first reading lists what can still be waited on, across jobs (a call into
# another job's detached actor is filed under that job): the server filters, so a cluster's
# finished tasks and dead actors never fill the limit. The chosen job's own rows, in every state,
# come in a second reading (`job_rows`), merged with `merge_job_rows`.
UNFINISHED_FILTERS: dict[str, list[tuple[str, str, str]]] = {
    "tasks": [("state", "!=", "FINISHED")],
    "actors": [("state", "!=", "DEAD")],
}
# Lists whose cut (or dropped events) can hide rows of the diagnosed job (tasks_after: the job's
# second task listing, that of the progress window).
JOB_LISTS = ("tasks", "actors", "tasks_of_job", "actors_of_job", "tasks_after")


def take_snapshot(dashboard_url: str, job_id: str | None, timeout_s: float = HTTP_TIMEOUT_S) -> Snapshot:
    """Read jobs, nodes, actors and tasks, placement groups, events and cluster status.

    The requests run in parallel; a failed one is recorded in `errors`, the rest still count.
    With `job_id`, that job's actors and tasks; without, the unfinished ones of every job
    (UNFINISHED_FILTERS; the caller picks the job and reads its own rows with `job_rows`).
    """
    client = DashboardClient(dashboard_url, timeout_s)
    job_filter = [("job_id", "=", job_id)] if job_id else []
    requests: dict[str, Any] = {
        "jobs": lambda: client.get("/api/jobs/"),
        "nodes": lambda: client.list_state("nodes"),
        "actors": lambda: client.list_state("actors", job_filter or UNFINISHED_FILTERS["actors"]),
        "tasks": lambda: client.list_state("tasks", job_filter or UNFINISHED_FILTERS["tasks"]),
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


@dataclass
class JobRows:
    """The chosen job's own tasks and actors in every state, read in a thread while stacks are taken."""

    tasks: ListResult = field(default_factory=ListResult)
    actors: ListResult = field(default_factory=ListResult)
    _thread: threading.Thread | None = None

    def join(self, timeout_s: float) -> bool:
        """Wait for the reading; False when it did not finish in time (the rows stay empty)."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True


def job_rows(dashboard_url: str, job_id: str, timeout_s: float = HTTP_TIMEOUT_S) -> JobRows:
    """Start reading one job's tasks and actors (all states) in a daemon thread; `join` it later."""
    client = DashboardClient(dashboard_url, timeout_s)
    out = JobRows()
    job_filter = [("job_id", "=", job_id)]

    def read() -> None:
        with ThreadPoolExecutor(max_workers=2) as pool:
            tasks = pool.submit(client.list_state, "tasks", job_filter)
            actors = pool.submit(client.list_state, "actors", job_filter)
            out.tasks, out.actors = tasks.result(), actors.result()

    out._thread = threading.Thread(target=read, name="debug-hang-job-rows", daemon=True)
    out._thread.start()
    return out


def task_key(task: dict[str, Any]) -> tuple[Any, Any]:
    """A task row's identity: one row per (task_id, attempt_number)."""
    return task.get("task_id"), task.get("attempt_number")


def merge_job_rows(snap: Snapshot, rows: JobRows) -> int:
    """Add the job's own rows to the snapshot's unfinished ones, without duplicates; returns how many.

    A task is one row per (task_id, attempt_number), an actor one per actor_id. A row already read
    stays as it was read (the snapshot is of one moment: `taken_at`); of the later reading only
    tasks that had ended by then (end_time_ms <= taken_at) and actors that had died are added, so
    the snapshot holds what one unfiltered reading would have held.
    """
    taken_ms = snap.taken_at * 1000.0
    seen_tasks = {task_key(t) for t in snap.tasks}
    seen_actors = {a.get("actor_id") for a in snap.actors}
    added = 0
    for name, result in (("tasks_of_job", rows.tasks), ("actors_of_job", rows.actors)):
        _store(snap, name, result)
    for task in rows.tasks.rows:
        key = task_key(task)
        end = task.get("end_time_ms")
        if key in seen_tasks or task.get("state") != "FINISHED" or (isinstance(end, (int, float)) and end > taken_ms):
            continue
        seen_tasks.add(key)
        snap.tasks.append(task)
        added += 1
    for actor in rows.actors.rows:
        if actor.get("actor_id") in seen_actors or actor.get("state") != "DEAD":
            continue
        seen_actors.add(actor.get("actor_id"))
        snap.actors.append(actor)
        added += 1
    return added


# The progress window's second task reading asks for at most this many tasks by id (one indexed
# GCS lookup each, MAX_PARALLEL_BY_ID at a time): those unfinished at the first reading and gone
# from the unfinished list at the second. Past it, the rest are counted, not read.
MAX_BY_ID = 64
MAX_PARALLEL_BY_ID = 8


@dataclass
class ProgressReading:
    """The job's tasks at the end of the progress window (what `tasks_after` replays).

    `mode` "full": every task row of the job (one listing, as long as it fits the limit).
    `mode` "by-id": the tasks unfinished at the first reading, read again one by one by task id
    (with more than MAX_BY_ID of them: the job's unfinished tasks, filtered on the server, and
    those that left that list since, by id) — every row the progress comparison can use,
    whatever the job's finished history.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    mode: Literal["full", "by-id"] = "full"
    error: str | None = None
    cut: dict[str, int] | None = None  # ListResult.completeness() of a list that came back cut
    notes: list[str] = field(default_factory=list)
    listed: bool = False  # by-id: the job's unfinished tasks were listed first (more than MAX_BY_ID)
    open_now: int = 0  # by-id: rows read that are not FINISHED
    ended: int = 0  # by-id: tasks unfinished at the first reading, now FINISHED or without a record
    read_by_id: int = 0  # of those, how many were read by id (at most MAX_BY_ID)
    not_found: int = 0  # read by id, no record left (evicted by the GCS's task-event cap)


def progress_reading(client: DashboardClient, job_id: str, before: list[dict[str, Any]],
                     history_cut: bool, deadline: Deadline | None = None) -> ProgressReading:
    """Read the job's tasks again for the progress comparison (analyse.analysis.detect_progress).

    While the job's history fits one listing (`history_cut` False: the first reading of its rows
    was whole), list every task of the job, as always. Otherwise — or when that listing comes
    back cut or fails — a job-filtered listing holds an arbitrary 10,000 of its records (the GCS returns
    its per-job index in hash order; the dashboard sorts by task id), so a RUNNING task or one
    that just finished can be missing: read by state and by id instead.
    """
    if not history_cut:
        full = client.list_state("tasks", [("job_id", "=", job_id)])
        if not full.truncated and not full.error:
            return ProgressReading(rows=full.rows)
    return _by_id(client, job_id, before, deadline)  # also when the listing failed (timed out on a loaded head)



def _by_id(client: DashboardClient, job_id: str, before: list[dict[str, Any]],
           deadline: Deadline | None = None) -> ProgressReading:
    """The job's tasks unfinished at the first reading, read again by task id (an indexed GCS
    lookup each). With more than MAX_BY_ID of them, the job's unfinished tasks are listed first
    (the GCS scans every record of the job) and only those that left that list are read by id.
    Each lookup is bounded by the client's timeout and by `deadline`: none starts after it, and
    none waits past it (a dashboard that stops answering costs the deadline, not 64 timeouts)."""
    out = ProgressReading(mode="by-id")
    # Tasks that can still finish: a FAILED attempt never will (its retry is a new attempt of the same id).
    was_open = {task_key(t) for t in before if t.get("job_id") == job_id and t.get("state") not in ("FINISHED", "FAILED")}
    candidates = was_open
    if len({tid for tid, _ in was_open}) > MAX_BY_ID:
        unfinished = client.list_state("tasks", [("job_id", "=", job_id), ("state", "!=", "FINISHED")])
        if unfinished.error:
            out.error = unfinished.error
            return out
        if unfinished.cut:
            out.cut = unfinished.completeness()  # more unfinished tasks than one answer holds
        out.listed = True
        out.rows = list(unfinished.rows)
        candidates = was_open - {task_key(t) for t in unfinished.rows}
    ids = sorted({str(tid) for tid, _ in candidates if tid})
    out.read_by_id = min(len(ids), MAX_BY_ID)
    if len(ids) > MAX_BY_ID:
        out.notes.append(f"{len(ids)} tasks of the job ended during the progress window; {MAX_BY_ID} of them "
                         "were read by id")
        ids = ids[:MAX_BY_ID]
    seen = {task_key(t) for t in out.rows}
    if ids:
        with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_BY_ID, len(ids))) as pool:
            answers = list(pool.map(lambda tid: _read_task(client, tid, deadline), ids))
        if not out.listed and all(a.error for a in answers):
            out.error = answers[0].error  # no second reading at all
            return out
        for tid, answer in zip(ids, answers, strict=True):
            if answer.error:
                out.notes.append(f"task {tid} not read by id: {answer.error[:200]}")
                continue
            out.not_found += not any(task_key(t) in candidates for t in answer.rows)
            out.rows += [t for t in answer.rows if task_key(t) not in seen]  # every attempt: a retry is news too
    now = {task_key(t): t.get("state") for t in out.rows}
    out.ended = sum(1 for k in was_open if now.get(k) in (None, "FINISHED"))
    out.open_now = sum(1 for t in out.rows if t.get("state") != "FINISHED")
    if out.not_found:
        out.notes.append(f"{out.not_found} tasks of the job unfinished at the first reading have no record left "
                         "(the GCS evicts finished tasks first past RAY_task_events_max_num_task_in_gcs): "
                         "whether they finished is unknown")
    return out


def _read_task(client: DashboardClient, task_id: str, deadline: Deadline | None) -> ListResult:
    """One task's rows by id, within the client's timeout and what is left of `deadline`."""
    if deadline is None:
        return client.list_state("tasks", [("task_id", "=", task_id)])
    if deadline.expired:
        return ListResult(error="not read: the diagnosis deadline passed")
    return client.list_state("tasks", [("task_id", "=", task_id)],
                             timeout_s=deadline.remaining(cap=client.timeout_s, floor=1.0))


def _store(snap: Snapshot, name: str, value: Any) -> None:
    if isinstance(value, ListResult):
        if value.error:
            # Cluster events only add context: their loss is a warning, not a collection error.
            optional = name in ("events", "tasks_of_job", "actors_of_job") or bool(value.rows)
            (snap.warnings if optional else snap.errors).append(value.error)
        if value.truncated:
            snap.truncated[name] = value.completeness()
            of = value.matched if value.matched is not None and value.matched > len(value.rows) else value.total
            if value.cut:
                snap.warnings.append(
                    f"{name}: the State API returned {len(value.rows)} of {of} rows"
                    + (f" ({value.events_dropped} task events dropped by Ray)" if value.events_dropped else "")
                    + "; the rest are missing from this diagnosis (raise RAY_MAX_LIMIT_FROM_API_SERVER on the head)")
            else:
                snap.warnings.append(
                    f"{name}: all {len(value.rows)} matching rows read, but Ray dropped {value.events_dropped} task "
                    "records in this list's scope (finished ones first, evicted past RAY_task_events_max_num_task_in_gcs, "
                    "100,000 by default): a dropped row is missing from this diagnosis")
        if name not in ("tasks_of_job", "actors_of_job"):
            setattr(snap, name, value.rows)
    elif name == "jobs":
        snap.jobs = list(value) if isinstance(value, list) else []
    elif name == "cluster_status":
        snap.cluster_status = (value or {}).get("data", {}).get("clusterStatus") or {}
    elif name == "cluster_status_text":
        snap.cluster_status_text = (value or {}).get("data", {}).get("clusterStatus")
