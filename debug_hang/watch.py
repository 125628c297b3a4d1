"""Watch running jobs with cheap progress signals; diagnose a job once when none moves for `stall`.

Per job and interval: one State API request (the job's task summary, filtered on the server by
job id: counts by function and state, never truncated row lists), one Log API request (the last
lines of a submitted job's driver log, read by the agent of the driver's node) and the job list
(Job API, to see jobs end). A progress file given by the user is `stat`-ed. No stack is dumped
until a stall is suspected; then a second reading confirms it and the full diagnosis
(`pipeline.run`) runs once into `<out>/<job>-<time>/`. The watcher re-arms when progress resumes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debug_hang.collect.address import parse_address, resolve_dashboard
from debug_hang.collect.state import DashboardClient
from debug_hang.errors import DebugHangError, NotFoundError, UnreachableError, UsageError
from debug_hang.snapshot import BARRIER_TASK, POLLING_TASKS

if TYPE_CHECKING:
    from debug_hang.pipeline import Diagnosis

# A State API summary or a log tail is served in milliseconds by a healthy head; 10 s covers a
# loaded one without letting one slow answer stretch an interval much.
REQUEST_TIMEOUT_S = 10.0
SUMMARY_ROWS = 10_000  # task records one State API answer holds (RAY_MAX_LIMIT_FROM_DATA_SOURCE)
LOG_TAIL_LINES = 5  # lines of the driver log compared between readings
SLOWDOWN = 4.0  # a quiet watch polls at most this many times slower than --interval
CONFIRM_S = 3.0  # the confirmation reading comes at most this long after the stall is noticed
ON_HANG_TIMEOUT_S = 120.0  # the user's --on-hang command is killed after this long
ENDED = ("SUCCEEDED", "FAILED", "STOPPED")
# Lines Ray itself writes into a driver's log on a timer, whether the job moves or not.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAY_NOISE = re.compile(r"^\s*\((autoscaler|raylet)\b|cannot be scheduled right now")


@dataclass
class WatchOptions:
    address: str | None = None
    job_id: str | None = None
    stall_s: float = 600.0
    interval_s: float = 30.0
    out_dir: Path | None = None  # diagnoses go into new subfolders here (None: a new private /tmp/ray_hang_watch_*)
    once: bool = False
    on_hang: str | None = None
    on_hang_timeout_s: float = ON_HANG_TIMEOUT_S
    progress_file: Path | None = None
    log_signal: bool = True
    deadline_s: float = 120.0


@dataclass
class Reading:
    """One reading of a job's signals: name → comparable value, plus a few words for people."""

    values: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


@dataclass
class JobWatch:
    """What the watcher knows about one job between readings."""

    job_id: str
    submission_id: str | None
    driver_node_id: str | None
    entrypoint: str
    progress_at: float
    last: dict[str, str] = field(default_factory=dict)
    changed_at: dict[str, float] = field(default_factory=dict)
    large: bool = False  # more task records than one State API answer holds
    finished: int | None = None  # FINISHED count of a large job, and when it was taken
    counted_at: float = 0.0
    fired: bool = False  # a diagnosis fired for the current stall: wait for progress to re-arm
    diagnoses: int = 0

    def label(self) -> str:
        return self.job_id + (f" ({self.submission_id})" if self.submission_id else "")


def task_signals(summary: dict[str, Any]) -> tuple[str, str, dict[str, int]]:
    """(fingerprint, note, train reports) of a `/api/v0/tasks/summarize` result.

    The fingerprint is every (function, state, count) of the job's tasks except the calls Ray's
    libraries make on a timer (Ray Train's status polls), so only the job's own work counts.
    """
    cluster = (summary.get("result") or {}).get("node_id_to_summary", {}).get("cluster", {})
    rows = []
    finished = 0
    reports: dict[str, int] = {}
    for name, entry in sorted((cluster.get("summary") or {}).items()):
        if name in POLLING_TASKS:
            continue
        counts = entry.get("state_counts") or {}
        rows += [f"{name}:{state}={n}" for state, n in sorted(counts.items())]
        finished += int(counts.get("FINISHED", 0))
        if name == BARRIER_TASK:
            reports["train-reports"] = int(counts.get("FINISHED", 0))
    digest = hashlib.sha1("\n".join(rows).encode(), usedforsecurity=False).hexdigest()
    return digest, f"{finished} of the job's tasks finished", reports


def log_signal(text: str) -> str:
    """A comparable value for a driver-log tail: its own lines, without Ray's timed messages."""
    lines = [ln for ln in _ANSI.sub("", text).splitlines() if ln.strip() and not _RAY_NOISE.search(ln)]
    return hashlib.sha1("\n".join(lines[-LOG_TAIL_LINES:]).encode(), usedforsecurity=False).hexdigest()


def own_ids() -> tuple[str | None, int]:
    """(submission id, pid) of this watcher, so it never watches or diagnoses itself."""
    raw = os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR")
    sub = None
    if raw:
        with contextlib.suppress(ValueError, AttributeError):
            sub = json.loads(raw).get("metadata", {}).get("job_submission_id")
    return sub, os.getpid()


def is_own(job: dict[str, Any], own: tuple[str | None, int]) -> bool:
    pid = str((job.get("driver_info") or {}).get("pid") or "")
    return bool(own[0] and job.get("submission_id") == own[0]) or pid == str(own[1])


def safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)[:80] or "job"


def fmt_s(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds < 120 else f"{seconds / 60:.1f}min"


def not_a_hang(diag: Diagnosis) -> str:
    """What a confirmation diagnosis saw that is no hang ("" when it fires): the job moving (a
    no-hang: tasks finished, bytes written, a thread whose stack or loop state advanced), or a
    culprit busy in a computation that is no spin (one long numpy call, a loop that advances by
    itself): a false alarm on a healthy long computation costs more than a late one."""
    if diag.verdict == "no-hang":
        return "the job move: " + ("; ".join(str(p) for p in diag.progress[:2]) or str(diag.summary)[:300])
    if diag.verdict != "inconclusive" or not diag.causes:
        return ""
    culprit = diag.causes[0].culprits[0]
    work = next((w for w in diag.busy if w.ref == culprit.ref), None)
    if culprit.state == "busy" and work is not None and work.state in ("no-spin", "advancing"):
        return f"a computation, not a wait: {work.text()}"
    return ""


class Watcher:
    """The watch loop; `say` receives every line for the user (stdout by default)."""

    def __init__(self, opts: WatchOptions, say: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if opts.stall_s <= 0 or opts.interval_s <= 0:
            raise UsageError("--stall and --interval must be positive")
        if opts.interval_s > opts.stall_s:
            raise UsageError(f"--interval ({opts.interval_s:.0f}s) must not exceed --stall ({opts.stall_s:.0f}s)")
        if opts.on_hang is not None:
            try:
                if not shlex.split(opts.on_hang):
                    raise ValueError("empty command")
            except ValueError as exc:
                raise UsageError(f"--on-hang {opts.on_hang!r} is not a command line: {exc}") from None
        self.opts = opts
        self.say = say or (lambda line: print(line, flush=True))
        self.clock, self.sleep = clock, sleep
        self.own = own_ids()
        self.jobs: dict[str, JobWatch] = {}
        self.client: DashboardClient | None = None
        self.down_since: float | None = None
        self.retries = 0
        self.pace = opts.interval_s

    def log(self, text: str) -> None:
        self.say(f"{dt.datetime.now():%H:%M:%S} watch: {text}")

    # -- the cluster ---------------------------------------------------------------------------

    def connect(self) -> DashboardClient:
        addr = resolve_dashboard(parse_address(self.opts.address), timeout_s=5.0)
        assert addr.dashboard_url
        self.client = DashboardClient(addr.dashboard_url, timeout_s=REQUEST_TIMEOUT_S)
        return self.client

    def list_jobs(self) -> list[dict[str, Any]]:
        client = self.client or self.connect()
        body = client.get("/api/jobs/")
        return [j for j in body if isinstance(j, dict)] if isinstance(body, list) else []

    def read(self, job: JobWatch, fresh: bool = False) -> Reading:
        """One reading of the job's signals (errors are recorded, never raised)."""
        assert self.client is not None
        reading = Reading()
        try:
            self._read_tasks(job, reading, fresh)
        except UnreachableError as exc:
            reading.errors.append(str(exc))
        if self.opts.log_signal and job.submission_id and job.driver_node_id:
            try:
                text = self.client.log_file([("node_id", job.driver_node_id),
                                             ("filename", f"job-driver-{job.submission_id}.log")], LOG_TAIL_LINES * 4)
                reading.values["driver-log"], reading.notes["driver-log"] = log_signal(text), "driver log tail"
            except UnreachableError as exc:
                reading.errors.append(f"driver log: {exc}")
        if self.opts.progress_file is not None:
            try:
                st = self.opts.progress_file.stat()
                reading.values["progress-file"] = f"{st.st_mtime_ns}:{st.st_size}"
                reading.notes["progress-file"] = f"{self.opts.progress_file} ({st.st_size} bytes)"
            except OSError as exc:
                reading.notes["progress-file"] = f"{self.opts.progress_file} unreadable ({exc.strerror})"
        return reading

    def _read_tasks(self, job: JobWatch, reading: Reading, fresh: bool = False) -> None:
        """The task signal: the job's task summary, or, once the job has more task records than
        one State API answer holds (the summary then counts the same oldest 10,000 forever), the
        job's unfinished tasks and its FINISHED count, both filtered on the GCS (see _read_large)."""
        assert self.client is not None
        params = [("filter_keys", "job_id"), ("filter_predicates", "="), ("filter_values", job.job_id)]
        if job.large:
            self._read_large(job, reading, params, fresh)
            return
        result = self._state("/api/v0/tasks/summarize", [*params, ("timeout", str(int(REQUEST_TIMEOUT_S)))])
        if int(result.get("total") or 0) > int(result.get("num_after_truncation") or 0):
            job.large = True
            self.log(f"job {job.label()}: more task records than one State API answer holds, the summary no longer moves; "
                     "following its unfinished tasks and its FINISHED count on the GCS from now on")
            self._read_tasks(job, reading, fresh)
            return
        value, note, reports = task_signals(result)
        reading.values["tasks"], reading.notes["tasks"] = value, note
        for name, count in reports.items():
            reading.values[name] = str(count)
            reading.notes[name] = f"{count} ray.train.report barrier call(s) finished, one per rank"

    def _read_large(self, job: JobWatch, reading: Reading, params: list[tuple[str, str]], fresh: bool) -> None:
        """A job past SUMMARY_ROWS records: every reading, its unfinished tasks (few, so the GCS
        answer is small); every stall/4 and when confirming a stall, its FINISHED count (the GCS
        matches every finished record and the dashboard converts up to 10,000 of them: seconds)."""
        polls = [kv for name in sorted(POLLING_TASKS) for kv in (("filter_keys", "name"), ("filter_predicates", "!="),
                                                                   ("filter_values", name))]
        head = [("limit", str(SUMMARY_ROWS)), ("detail", "0"), ("timeout", str(int(REQUEST_TIMEOUT_S)))]
        rows = self._state("/api/v0/tasks", [*head, *params, ("filter_keys", "state"), ("filter_predicates", "!="),
                                             ("filter_values", "FINISHED"), *polls]).get("result") or []
        keys = sorted(f"{r.get('task_id')}:{r.get('attempt_number')}:{r.get('state')}" for r in rows if isinstance(r, dict))
        reading.values["tasks"] = hashlib.sha1("\n".join(keys).encode(), usedforsecurity=False).hexdigest()
        reading.notes["tasks"] = f"{len(keys)} unfinished task(s) of the job"
        now = self.clock()
        if fresh or job.finished is None or now - job.counted_at >= max(self.opts.interval_s, self.opts.stall_s / 4):
            result = self._state("/api/v0/tasks", [*head[1:], ("limit", "1"), *params, ("filter_keys", "state"),
                                                   ("filter_predicates", "="), ("filter_values", "FINISHED"), *polls])
            job.finished, job.counted_at = int(result.get("total") or 0), now
        reading.values["finished"] = str(job.finished)
        reading.notes["finished"] = f"{job.finished} of the job's tasks finished (counted by the GCS, every {fmt_s(self.opts.stall_s / 4)})"

    def _state(self, path: str, params: list[tuple[str, str]]) -> dict[str, Any]:
        assert self.client is not None
        body = self.client.get(path, params)
        if not isinstance(body, dict) or not body.get("result", False):
            msg = body.get("msg", "failed") if isinstance(body, dict) else "not a JSON object"
            raise UnreachableError(f"State API {path}: {str(msg)[:200]}")
        result = body.get("data", {}).get("result", {})
        return result if isinstance(result, dict) else {}

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> None:
        """Pick the job(s) to watch; raise when there is none (bad id, nothing running)."""
        self.connect()
        jobs = self.list_jobs()
        if self.opts.job_id:
            match = [j for j in jobs if self.opts.job_id in (j.get("job_id"), j.get("submission_id"))]
            if not match:
                known = ", ".join(f"{j.get('job_id')} ({j.get('status')})" for j in jobs) or "none"
                raise NotFoundError(f"no job {self.opts.job_id!r} in this cluster; jobs: {known}")
            if is_own(match[0], self.own):
                raise UsageError(f"job {self.opts.job_id} is this watcher itself")
            job = match[0]
            while not job.get("job_id") and job.get("status") not in ENDED:  # submitted, driver not started yet
                self.sleep(self.opts.interval_s)
                job = next((j for j in self.list_jobs() if j.get("submission_id") == job.get("submission_id")), job)
            if job.get("status") in ENDED:
                raise NotFoundError(f"job {self.opts.job_id} has already ended ({job.get('status')})")
            self._add(job)
        else:
            self._add_running(jobs)
            if not self.jobs:
                raise NotFoundError("no RUNNING job to watch (pass --job-id, or start the watcher once the job runs)")

    def _add_running(self, jobs: list[dict[str, Any]]) -> None:
        for job in jobs:
            if job.get("status") in ("RUNNING", "PENDING") and job.get("job_id") and not is_own(job, self.own) \
                    and str(job["job_id"]) not in self.jobs:
                self._add(job)

    def _add(self, job: dict[str, Any]) -> None:
        watch = JobWatch(job_id=str(job.get("job_id") or ""), submission_id=job.get("submission_id"),
                         driver_node_id=job.get("driver_node_id"), entrypoint=str(job.get("entrypoint") or "")[:80],
                         progress_at=self.clock())
        if not watch.job_id:  # a submitted job whose driver has not started yet: next round
            return
        self.jobs[watch.job_id] = watch
        reading = self.read(watch)
        watch.last = dict(reading.values)
        watch.changed_at = dict.fromkeys(reading.values, self.clock())
        signals = ", ".join(f"{k} ({reading.notes.get(k, '')})" for k in reading.values) or "none readable yet"
        missing = []
        if not (watch.submission_id and watch.driver_node_id) and self.opts.log_signal:
            missing.append("driver log (not a submitted job, or its driver has not started)")
        if "train-reports" not in reading.values:
            missing.append("train reports (no ray.train.report seen yet)")
        self.log(f"watching job {watch.label()} `{watch.entrypoint}`: signals {signals}"
                 + (f"; not available: {'; '.join(missing)}" if missing else "")
                 + f"; stall {fmt_s(self.opts.stall_s)}, interval {fmt_s(self.opts.interval_s)}")

    def run(self) -> int:
        """Watch until every watched job has ended (or, with --once, the first diagnosis fires)."""
        self.start()
        while True:
            try:
                jobs = self.list_jobs()
            except UnreachableError as exc:
                self._unreachable(str(exc))
                continue
            if self.down_since is not None:
                self.log(f"cluster visible again after {fmt_s(self.clock() - self.down_since)} "
                         f"({self.retries} retries); resuming the watch")
                self.down_since, self.retries = None, 0
            if self._end_jobs(jobs):
                return 0
            if not self.opts.job_id:
                self._add_running(jobs)
            moved_any = False
            for watch in list(self.jobs.values()):
                outcome = self._check(watch)
                moved_any |= outcome == "moved"
                if outcome == "fired" and self.opts.once:
                    self.log("--once: first diagnosis written, watch ends")
                    return 0
            if self.down_since is not None:
                continue
            self.pace = self.opts.interval_s if moved_any else min(self.pace * 1.5, self.opts.interval_s * SLOWDOWN)
            self.sleep(self._next_wait())

    def _next_wait(self) -> float:
        """The adaptive interval, shortened to land on the next stall deadline, never under --interval."""
        wait = self.pace
        now = self.clock()
        for watch in self.jobs.values():
            if not watch.fired:
                wait = min(wait, watch.progress_at + self.opts.stall_s - now)
        return max(wait, self.opts.interval_s)

    def _unreachable(self, error: str) -> None:
        if self.down_since is None:
            self.down_since = self.clock()
            self.log(f"cannot see the cluster: {error}; retrying with back-off (the stall clock keeps running, "
                     "progress made meanwhile is seen on return)")
        self.retries += 1
        wait = min(self.opts.interval_s * 2 ** min(self.retries - 1, 10), max(self.opts.interval_s * 8, 10.0), 300.0)
        if self.retries % 10 == 0:
            self.log(f"still cannot see the cluster after {fmt_s(self.clock() - self.down_since)}: {error}")
        self.sleep(wait)
        if not (self.opts.address or "").startswith("http"):
            with contextlib.suppress(DebugHangError):  # the dashboard may come back on another port
                self.connect()

    def _end_jobs(self, jobs: list[dict[str, Any]]) -> bool:
        """Drop watched jobs that ended; True when nothing is left to watch."""
        by_id = {str(j.get("job_id")): j for j in jobs if j.get("job_id")}
        for job_id, watch in list(self.jobs.items()):
            job = by_id.get(job_id)
            status = job.get("status") if job else "gone from the job list"
            if job is not None and not watch.driver_node_id and job.get("driver_node_id"):
                watch.driver_node_id = job["driver_node_id"]  # its driver started: the log becomes a signal
            if job is None or status in ENDED:
                self.log(f"job {watch.label()} ended ({status}); {watch.diagnoses} diagnosis(es) written")
                del self.jobs[job_id]
        if not self.jobs:
            self.log("no job left to watch: the watch ends")
            return True
        return False

    def _check(self, watch: JobWatch) -> str:
        """Compare a new reading with the last: 'moved', 'quiet', 'fired' or 'unreadable'."""
        reading = self.read(watch)
        now = self.clock()
        if not reading.values and reading.errors:
            self._unreachable(reading.errors[0])
            return "unreadable"
        moved = self._update(watch, reading, now)
        if moved:
            if watch.fired:
                self.log(f"job {watch.label()}: progress resumed ({', '.join(moved)} moved); re-armed")
            watch.fired = False
            watch.progress_at = now
            return "moved"
        if watch.fired or now - watch.progress_at < self.opts.stall_s:
            return "quiet"
        return self._stalled(watch, now)

    def _update(self, watch: JobWatch, reading: Reading, now: float) -> list[str]:
        moved = []
        for name, value in reading.values.items():
            if name not in watch.last:
                self.log(f"job {watch.label()}: new signal {name} ({reading.notes.get(name, '')})")
                moved.append(name)
            elif watch.last[name] != value:
                moved.append(name)
            else:
                continue
            watch.last[name] = value
            watch.changed_at[name] = now
        return moved

    def _stalled(self, watch: JobWatch, now: float) -> str:
        silent = ", ".join(f"{name} silent {fmt_s(now - watch.changed_at.get(name, watch.progress_at))}"
                           for name in sorted(watch.last)) or "no signal readable"
        self.log(f"job {watch.label()}: no progress for {fmt_s(now - watch.progress_at)} ({silent}); "
                 "confirming with a second reading")
        self.sleep(min(CONFIRM_S, self.opts.interval_s))
        moved = self._update(watch, self.read(watch, fresh=True), self.clock())
        if moved:
            self.log(f"job {watch.label()}: stall not confirmed ({', '.join(moved)} moved)")
            watch.progress_at = self.clock()
            return "moved"
        return self._diagnose(watch)

    def _diagnose(self, watch: JobWatch) -> str:
        from debug_hang.pipeline import Options, run

        started = self.clock()
        try:
            folder = self.new_folder(f"{safe_name(watch.job_id)}-{dt.datetime.now():%Y%m%d-%H%M%S}")
            self.log(f"job {watch.label()}: stall confirmed; diagnosing into {folder}")
            # Ray prints cluster messages to stdout from a background thread once connected.
            with contextlib.redirect_stdout(sys.stderr):
                diag = run(Options(address=self.opts.address, job_id=watch.job_id, output_dir=folder,
                                   deadline_s=self.opts.deadline_s))
        except Exception as exc:  # noqa: BLE001 - the watch survives a failed diagnosis and retries at the next stall
            self.log(f"job {watch.label()}: diagnosis failed: {type(exc).__name__}: {str(exc)[:300]}; "
                     f"retrying after another {fmt_s(self.opts.stall_s)} without progress")
            watch.progress_at = self.clock()
            return "quiet"
        watch.diagnoses += 1
        self.say(f"report: {folder / 'report.md'}")
        self.say(f"verdict: {diag.verdict} (job {diag.job_id}, {self.clock() - started:.1f}s)")
        self.say(diag.summary)
        for cause in diag.causes[:3]:
            self.say(f"  - {cause.pattern}: {', '.join(c.label() for c in cause.culprits)} (confidence {cause.confidence:.2f})")
        moved = not_a_hang(diag)
        if moved:
            self.log(f"job {watch.label()}: the signals are silent but the diagnosis saw {moved}; not firing "
                     "(a long computation is no hang), the stall clock restarts")
            watch.progress_at = self.clock()
            return "quiet"
        watch.fired = True
        self._on_hang(watch, folder, diag.verdict, diag.summary)
        return "fired"

    def out_dir(self) -> Path:
        """The folder of the diagnoses: --out, or a new private one made (and said) when first needed."""
        if self.opts.out_dir is None:
            self.opts.out_dir = Path(tempfile.mkdtemp(prefix="ray_hang_watch_"))
            self.log(f"diagnoses go into {self.opts.out_dir}")
        return self.opts.out_dir

    def new_folder(self, name: str) -> Path:
        """A new private folder for one diagnosis: `name`, or `name-2`, ... when another watcher
        (or an earlier stall in the same second) took it; made exclusively, so never shared."""
        for n in range(1, 1000):
            path = self.out_dir() / (name if n == 1 else f"{name}-{n}")
            try:
                os.mkdir(path, 0o700)
            except FileExistsError:
                continue
            return path
        raise UsageError(f"{self.out_dir()} holds 999 folders named {name}*: give another --out")

    def _on_hang(self, watch: JobWatch, folder: Path, verdict: str, summary: str) -> None:
        if not self.opts.on_hang:
            return
        argv = shlex.split(self.opts.on_hang)
        env = dict(os.environ, DEBUG_HANG_REPORT=str(folder / "report.md"), DEBUG_HANG_DIR=str(folder),
                   DEBUG_HANG_JOB_ID=watch.job_id, DEBUG_HANG_VERDICT=verdict,
                   DEBUG_HANG_SUMMARY=re.sub(r"[\x00-\x1f\x7f]", " ", summary)[:1000])
        try:
            proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, timeout=self.opts.on_hang_timeout_s,
                                  check=False)
            self.log(f"--on-hang {argv[0]} exited {proc.returncode}")
        except subprocess.TimeoutExpired:
            self.log(f"--on-hang {argv[0]} killed after {fmt_s(self.opts.on_hang_timeout_s)}")
        except OSError as exc:
            self.log(f"--on-hang {argv[0]} could not run: {exc.strerror or exc}")
