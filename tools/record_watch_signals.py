#!/usr/bin/env python3
"""Record the watcher's raw signals from real jobs into tests/data/watch/<job>.json.

A maintainer tool: starts its own loopback cluster (GCS on --port), runs a healthy job
(examples/healthy_slow.py), a hung one (examples/actor_call_cycle.py, read after it hung) and a
Ray Train run that reports every epoch with one quiet epoch (tests/jobs/train_reports.py), and
stores, once a second, exactly what `debug-hang watch` reads: the job's task summary
(`/api/v0/tasks/summarize` filtered by job id, its `data.result`) and the driver log tail. The
unit tests in tests/test_watch.py re-read these series.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

from debug_hang import localcluster  # noqa: E402
from debug_hang.collect.state import DashboardClient  # noqa: E402
from debug_hang.watch import LOG_TAIL_LINES  # noqa: E402

OUT = ROOT / "tests" / "data" / "watch"


def reading(client: DashboardClient, job: dict[str, Any], start: float) -> dict[str, Any]:
    body = client.get("/api/v0/tasks/summarize", [("filter_keys", "job_id"), ("filter_predicates", "="),
                                                  ("filter_values", str(job["job_id"])), ("timeout", "10")])
    tail = client.log_file([("node_id", str(job["driver_node_id"])),
                            ("filename", f"job-driver-{job['submission_id']}.log")], LOG_TAIL_LINES * 4)
    return {"t": round(time.monotonic() - start, 2), "summary": body["data"]["result"], "log_tail": tail}


def record(cluster: localcluster.LocalCluster, name: str, entrypoint: str, working_dir: Path, seconds: float,
           hung_example: str | None = None) -> None:
    from ray.job_submission import JobSubmissionClient

    client = DashboardClient(cluster.dashboard)
    jobs = JobSubmissionClient(cluster.dashboard)
    if hung_example:
        sub = localcluster.submit_example(cluster, hung_example).submission_id
    else:
        sub = localcluster.submit_job(jobs, entrypoint=entrypoint, runtime_env={"working_dir": str(working_dir)})
        localcluster.wait_for(lambda: "READY" in jobs.get_job_logs(sub), 180, f"{name} to print READY")
    job = next(j for j in client.get("/api/jobs/") if j.get("submission_id") == sub)
    start, series = time.monotonic(), []
    while time.monotonic() - start < seconds and not jobs.get_job_status(sub).is_terminal():
        series.append(reading(client, job, start))
        time.sleep(1.0)
    series.append(reading(client, job, start))
    status = str(jobs.get_job_status(sub))
    localcluster.stop_job(cluster, localcluster.SubmittedJob(sub, None))
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"job": name, "entrypoint": entrypoint, "status_at_end": status, "readings": series}
    (OUT / f"{name}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"{name}: {len(series)} readings, job {status}", file=sys.stderr)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=int(os.environ.get("DEBUG_HANG_TEST_PORT", "6400")),
                   help="GCS port of the tool's own cluster (default $DEBUG_HANG_TEST_PORT or 6400)")
    p.add_argument("--only", choices=["healthy_slow", "actor_call_cycle", "train_reports"], help="record only this series")
    args = p.parse_args()
    cluster = localcluster.start(args.port, num_cpus=4)
    try:
        if args.only in (None, "healthy_slow"):
            record(cluster, "healthy_slow", "python healthy_slow.py", localcluster.EXAMPLES_DIR, 8)
        if args.only in (None, "actor_call_cycle"):
            record(cluster, "actor_call_cycle", "", localcluster.EXAMPLES_DIR, 6, hung_example="actor_call_cycle")
        if args.only in (None, "train_reports"):
            record(cluster, "train_reports", "python train_reports.py 5 15", ROOT / "tests" / "jobs", 150)
    finally:
        localcluster.stop(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
