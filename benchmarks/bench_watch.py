#!/usr/bin/env python3
"""What `debug-hang watch` costs while it watches: CPU share of a core and RSS of the watcher process.

Starts its own loopback cluster (GCS on --port; it kills only its own processes, never `ray stop`),
submits examples/healthy_slow.py (a job that progresses all the time, ~10 min), runs
`python -m debug_hang watch --job-id ... --interval I` as a separate process for each interval
given, and reads the watcher's /proc/<pid>/stat (utime+stime) and /proc/<pid>/status (VmRSS,
VmHWM) after its start-up (the first reading), over --window seconds. Also times the dashboard's
answer to the one State API request per reading (the job's task summary).
Table on stdout (--json for the figures), progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

from debug_hang import localcluster  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def mem_mb(pid: int) -> tuple[float, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def measure(cluster: localcluster.LocalCluster, job_id: str, interval: float, window: float) -> dict[str, Any]:
    env = cluster.env()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "debug_hang", "watch", cluster.gcs, "--job-id", job_id,
                             "--interval", str(interval), "--stall", "1h", "--out", "/tmp/bench_watch_out"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # "watching job ...": start-up and the first reading are done
        if "watching job" not in first:
            raise SystemExit(f"the watcher did not start: {first!r}")
        c0, t0 = cpu_s(proc.pid), time.monotonic()
        time.sleep(window)
        c1, t1 = cpu_s(proc.pid), time.monotonic()
        rss, hwm = mem_mb(proc.pid)
        if proc.poll() is not None:
            raise SystemExit("the watcher ended during the measurement")
    finally:
        proc.kill()
        proc.wait(10)
    readings = max(1, int(window // interval))
    return {"interval_s": interval, "window_s": round(t1 - t0, 1), "cpu_s": round(c1 - c0, 3),
            "cpu_percent_of_core": round(100 * (c1 - c0) / (t1 - t0), 3),
            "cpu_ms_per_reading": round(1000 * (c1 - c0) / readings, 1), "rss_mb": round(rss, 1), "peak_rss_mb": round(hwm, 1)}


def summary_latency(cluster: localcluster.LocalCluster, job_id: str, repeat: int = 5) -> dict[str, Any]:
    query = urllib.parse.urlencode([("filter_keys", "job_id"), ("filter_predicates", "="), ("filter_values", job_id)])
    times, body = [], b""
    for _ in range(repeat):
        start = time.monotonic()
        with urllib.request.urlopen(f"{cluster.dashboard}/api/v0/tasks/summarize?{query}", timeout=30) as resp:
            body = resp.read()
        times.append(time.monotonic() - start)
    total = json.loads(body)["data"]["result"]["total"]
    return {"task_records": total, "median_ms": round(1000 * statistics.median(times), 1), "bytes": len(body)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=int(os.environ.get("DEBUG_HANG_TEST_PORT", "6470")),
                   help="GCS port of the benchmark's own cluster (default $DEBUG_HANG_TEST_PORT or 6470)")
    p.add_argument("--intervals", default="30,5,1", help="watch intervals to measure, seconds (default 30,5,1)")
    p.add_argument("--window", type=float, default=120.0, help="seconds measured per interval (default 120)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    cluster = localcluster.start(args.port, num_cpus=4)
    try:
        print("cluster up; submitting healthy_slow", file=sys.stderr)
        job = localcluster.submit_example(cluster, "healthy_slow", settle_s=0)
        rows = []
        for interval in [float(x) for x in args.intervals.split(",")]:
            print(f"measuring --interval {interval:g} over {args.window:g}s", file=sys.stderr)
            rows.append(measure(cluster, str(job.job_id), interval, args.window))
        latency = summary_latency(cluster, str(job.job_id))
        localcluster.stop_job(cluster, job)
    finally:
        localcluster.stop(cluster)
    if args.json:
        print(json.dumps({"watch": rows, "task_summary_request": latency}, indent=2))
        return 0
    print("| --interval | window s | CPU s | % of a core | CPU ms / reading | RSS MB | peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['interval_s']:g} s | {r['window_s']} | {r['cpu_s']} | {r['cpu_percent_of_core']} | "
              f"{r['cpu_ms_per_reading']} | {r['rss_mb']} | {r['peak_rss_mb']} |")
    print(f"\ntask summary request: {latency['median_ms']} ms median over {latency['task_records']} task records, "
          f"{latency['bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
