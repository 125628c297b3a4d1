#!/usr/bin/env python3
"""A huge job: ≥ 100,000 finished tasks, then a handful blocked — found, timed, memory measured.

Starts its own loopback cluster (GCS on --port, default $DEBUG_HANG_TEST_PORT or 6480; own temp dir;
killed afterwards, never `ray stop`), submits tests/jobs/many_tasks_then_blocked.py: the driver runs
--tasks tiny tasks to completion, --chunk at a time, then leaves --blocked `waiter` tasks in
`ray.get` on `Gate.wait` (an event nobody sets; the other Gate.wait calls queue behind it). Then:

1. What Ray returns for the job (the State API over HTTP, as the tool reads it): the job-wide task
   listing the progress window used before (rows, total, which unfinished tasks it misses), the
   job's unfinished tasks filtered on the server, and whether the GCS hit its task-event cap
   (RAY_task_events_max_num_task_in_gcs, 100,000 by default: its warning in gcs_server.out).
2. The snapshot phase in-process (first reading of every job's unfinished rows, the job's own rows
   read and merged): wall time, then its peak Python memory (tracemalloc, a separate run).
3. The progress window's second reading (`progress_reading`): time, mode, rows.
4. `scripts/diagnose_ray_hang.sh ADDRESS OUT --job-id JOB` --repeat times: wall time (median), the
   phase timings of diagnosis.json, the process's peak RSS (wait4), and the checks: verdict hang,
   culprit Gate, every RUNNING task's worker dumped, tasks_after.json holding every unfinished
   task, cut lists recorded in diagnosis.json `collection.truncated`.

The load average is read before and after. Exit 1 when a check fails. Setup alone (100,000 tasks
on 2 cores) takes one to a few minutes; the job's own figure is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

from debug_hang import localcluster  # noqa: E402
from debug_hang.collect.state import (  # noqa: E402
    LIST_LIMIT,
    DashboardClient,
    job_rows,
    merge_job_rows,
    progress_reading,
    take_snapshot,
)
from debug_hang.pipeline import FRESH_TASK_S  # noqa: E402

JOB = ROOT / "tests" / "jobs" / "many_tasks_then_blocked.py"
GCS_CAP_WARNING = b"Max number of tasks event"


def key(task: dict[str, Any]) -> tuple[Any, Any]:
    return task.get("task_id"), task.get("attempt_number")


def setup(cluster: localcluster.LocalCluster, tasks: int, blocked: int, chunk: int) -> dict[str, Any]:
    """Submit the job and wait until its waiters and Gate.wait run; returns job id and setup times."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(cluster.dashboard)
    start = time.monotonic()
    sub = localcluster.submit_job(client, entrypoint=f"python {JOB.name} {tasks} {blocked} {chunk}",
                            runtime_env={"working_dir": str(JOB.parent)})
    localcluster.wait_for(lambda: "READY" in client.get_job_logs(sub) or client.get_job_status(sub).is_terminal(),
                          7200, "the job's finished history", interval_s=5)
    logs = client.get_job_logs(sub)
    if "READY" not in logs:
        raise SystemExit(f"bench_tasks: the job ended early: {logs[-500:]}")
    ready_s = time.monotonic() - start
    job_id = str(client.get_job_info(sub).job_id)
    state = DashboardClient(cluster.dashboard, timeout_s=60)
    localcluster.wait_for(lambda: len(running(state, job_id)) >= blocked + 1, 300, "the waiters running")
    time.sleep(FRESH_TASK_S + 1)  # older than the diagnosis' fresh-task window, as a real hang is
    job_setup = next((float(line.split()[1]) for line in logs.splitlines() if line.startswith("SETUP ")), None)
    return {"job_id": job_id, "submission_id": sub, "ready_s": round(ready_s, 1), "history_s": job_setup}


def running(state: DashboardClient, job_id: str) -> list[dict[str, Any]]:
    rows = state.list_state("tasks", [("job_id", "=", job_id), ("state", "!=", "FINISHED")]).rows
    return [t for t in rows if t.get("state") == "RUNNING"]


def ray_facts(cluster: localcluster.LocalCluster, job_id: str) -> dict[str, Any]:
    """What the State API returns for the job, and whether the GCS hit its task-event cap."""
    state = DashboardClient(cluster.dashboard, timeout_s=120)
    start = time.monotonic()
    wide = state.list_state("tasks", [("job_id", "=", job_id)])
    wide_s = time.monotonic() - start
    start = time.monotonic()
    unfinished = state.list_state("tasks", [("job_id", "=", job_id), ("state", "!=", "FINISHED")])
    unfinished_s = time.monotonic() - start
    in_wide = {key(t) for t in wide.rows}
    missed = [t for t in unfinished.rows if key(t) not in in_wide]
    logs = Path(cluster.temp_dir) / "session_latest" / "logs"
    cap_hit = any(GCS_CAP_WARNING in p.read_bytes() for p in logs.glob("gcs_server*.out"))
    return {"job_wide_listing": {"s": round(wide_s, 2), "rows": len(wide.rows), "total": wide.total,
                                 "unfinished_missed": len(missed), "unfinished_missed_names": sorted(
                                     f"{t.get('name')} {t.get('state')}" for t in missed)},
            "unfinished_listing": {"s": round(unfinished_s, 2), "rows": len(unfinished.rows),
                                   "total": unfinished.total, "events_dropped": unfinished.events_dropped,
                                   "cut": unfinished.cut},
            "gcs_task_event_cap_warning": cap_hit}


def snapshot_phase(url: str, job_id: str) -> dict[str, Any]:
    """The first reading, the job's own rows and their merge, as pipeline.run does them."""
    snap = take_snapshot(url, None, timeout_s=60)
    rows = job_rows(url, job_id, timeout_s=60)
    rows.join(120)
    merge_job_rows(snap, rows)
    return {"tasks": len(snap.tasks), "actors": len(snap.actors), "truncated": snap.truncated, "snap": snap}


def bench_snapshot(url: str, job_id: str) -> dict[str, Any]:
    start = time.monotonic()
    out = snapshot_phase(url, job_id)
    wall = time.monotonic() - start
    snap = out.pop("snap")
    tracemalloc.start()
    snapshot_phase(url, job_id)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    client = DashboardClient(url, timeout_s=60)
    start = time.monotonic()
    after = progress_reading(client, job_id, snap.tasks, "tasks_of_job" in snap.truncated)
    after_s = time.monotonic() - start
    return {**out, "s": round(wall, 2), "peak_python_mb": round(peak / 2**20, 1),
            "progress_reading": {"s": round(after_s, 2), "mode": after.mode, "rows": len(after.rows),
                                 "open_now": after.open_now, "ended": after.ended, "cut": after.cut}}


def run_script(cluster: localcluster.LocalCluster, job_id: str, out: Path) -> tuple[float, float]:
    """One diagnosis through the script: (wall seconds, peak RSS MB of the diagnosing process)."""
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen([str(ROOT / "scripts" / "diagnose_ray_hang.sh"), cluster.gcs, str(out),
                                 "--job-id", job_id], stdout=subprocess.DEVNULL, stderr=err, env=cluster.env())
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak RSS
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"bench_tasks: the diagnosis failed (rc {proc.returncode}): "
                             f"{err.read().decode(errors='replace')[-500:]}")
    return wall, usage.ru_maxrss / 1024


def check(out: Path, state: DashboardClient, job_id: str) -> tuple[dict[str, Any], list[str]]:
    """Read one output folder; the list holds the checks that failed."""
    diagnosis = json.loads((out / "diagnosis.json").read_text())
    stacks = json.loads((out / "stacks.json").read_text())
    after = {key(t): t.get("state") for t in json.loads((out / "tasks_after.json").read_text())}
    unfinished = state.list_state("tasks", [("job_id", "=", job_id), ("state", "!=", "FINISHED")]).rows
    culprits = [c.get("class_name") for cause in diagnosis.get("root_causes") or [] for c in cause["culprits"]]
    dumped = {p["pid"] for p in stacks["processes"]}
    pids = {int(t["worker_pid"]) for t in unfinished if t.get("state") == "RUNNING" and t.get("worker_pid")}
    failed = []
    if diagnosis["verdict"] != "hang":
        failed.append(f"verdict {diagnosis['verdict']}: {diagnosis['summary'][:200]}")
    if not culprits or culprits[0] != "Gate":
        failed.append(f"culprits {culprits}")
    if not pids <= dumped:
        failed.append(f"RUNNING tasks' workers not dumped: {sorted(pids - dumped)}")
    missing = [t for t in unfinished if after.get(key(t)) != t.get("state")]
    if missing:
        failed.append(f"{len(missing)} unfinished tasks not in tasks_after.json")
    truncated = diagnosis["collection"].get("truncated") or {}
    warnings = json.loads((out / "snapshot.json").read_text()).get("warnings") or []
    late = any("were not read in time" in w for w in warnings)  # a loaded head: the history is skipped, said so
    if "tasks_of_job" not in truncated and not late:
        failed.append("the job's cut history is not recorded in collection.truncated")
    facts = {"verdict": diagnosis["verdict"], "culprits": culprits, "confidence": [
        c.get("confidence") for c in diagnosis.get("root_causes") or []], "dumped": len(dumped),
        "running_workers": len(pids), "tasks_after": len(after), "unfinished": len(unfinished),
        "truncated": truncated, "history_not_read_in_time": late,
        "timings": diagnosis["collection"].get("timings") or {}, "warnings": warnings}
    return facts, failed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=100_000, help="finished tasks before the hang (default 100000)")
    p.add_argument("--blocked", type=int, default=3, help="blocked waiter tasks (default 3)")
    p.add_argument("--chunk", type=int, default=1000, help="tasks per ray.get batch (default 1000)")
    p.add_argument("--repeat", type=int, default=3, help="timed diagnoses through the script (default 3)")
    p.add_argument("--port", type=int, default=int(os.environ.get("DEBUG_HANG_TEST_PORT", "6480")),
                   help="GCS port of the benchmark cluster (default $DEBUG_HANG_TEST_PORT or 6480)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    load = [round(os.getloadavg()[0], 1)]
    cluster = localcluster.start(args.port, num_cpus=2)
    try:
        print(f"cluster {cluster.gcs}; running {args.tasks} tasks...", file=sys.stderr)
        job = setup(cluster, args.tasks, args.blocked, args.chunk)
        print(f"job {job['job_id']} ready after {job['ready_s']} s", file=sys.stderr)
        load.append(round(os.getloadavg()[0], 1))
        facts = ray_facts(cluster, job["job_id"])
        snapshot = bench_snapshot(cluster.dashboard, job["job_id"])
        state = DashboardClient(cluster.dashboard, timeout_s=60)
        walls, rss, runs, failures = [], [], [], []
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                wall, peak = run_script(cluster, job["job_id"], Path(tmp) / "d")
                facts_i, failed = check(Path(tmp) / "d", state, job["job_id"])
            walls.append(wall)
            rss.append(peak)
            runs.append(facts_i)
            failures += [f"run {i + 1}: {f}" for f in failed]
            print(f"run {i + 1}: {wall:.1f} s, peak RSS {peak:.0f} MB, {facts_i['timings']}", file=sys.stderr)
        load.append(round(os.getloadavg()[0], 1))
    finally:
        localcluster.stop(cluster)
    result = {"tasks": args.tasks, "blocked": args.blocked, "list_limit": LIST_LIMIT, "setup": job, "ray": facts,
              "snapshot_phase": snapshot, "script_median_s": round(statistics.median(walls), 1),
              "script_runs_s": [round(w, 1) for w in walls], "peak_rss_mb": round(max(rss)),
              "phase_medians_s": {k: round(statistics.median(r["timings"].get(k, 0.0) for r in runs), 2)
                                  for k in runs[0]["timings"]},
              "last_run": runs[-1], "loadavg": load, "failures": failures}
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"setup: {args.tasks} tasks finished in {job['history_s']} s (job), READY after {job['ready_s']} s")
        print(f"Ray: job-wide listing {facts['job_wide_listing']}; unfinished listing {facts['unfinished_listing']}; "
              f"GCS task-event cap warning: {facts['gcs_task_event_cap_warning']}")
        print(f"snapshot phase: {snapshot['s']} s, peak Python memory {snapshot['peak_python_mb']} MB, "
              f"{snapshot['tasks']} task rows, truncated {snapshot['truncated']}")
        print(f"progress reading: {snapshot['progress_reading']}")
        print(f"script: median {result['script_median_s']} s (runs {result['script_runs_s']}), peak RSS "
              f"{result['peak_rss_mb']} MB, phases {result['phase_medians_s']}")
        print(f"last run: {json.dumps({k: v for k, v in runs[-1].items() if k != 'timings'})}")
        print(f"load average: {load}")
        print("checks: " + ("all passed" if not failures else "; ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
