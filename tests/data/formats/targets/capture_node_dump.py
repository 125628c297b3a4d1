#!/usr/bin/env python3
"""Record `run_on_each_ray_node.py --dump` output (text and --json) of a real hung job.

Starts a loopback cluster on PORT, submits examples/EXAMPLE.py, waits for its hang, dumps the
job's actors and driver on their node once with the script as a user runs it, saves the outputs
under tests/data/formats/node-dump/, then stops the job and the cluster.

usage: capture_node_dump.py [--port 6427] [--example gloo_skipped_allreduce]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))

from debug_hang.state import DashboardClient  # noqa: E402

from debug_hang import localcluster  # noqa: E402

OUT = ROOT / "tests" / "data" / "formats" / "node-dump"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=6427)
    parser.add_argument("--example", default="gloo_skipped_allreduce")
    args = parser.parse_args()
    cluster = localcluster.start(args.port)
    try:
        job = localcluster.submit_example(cluster, args.example)
        client = DashboardClient(cluster.dashboard, timeout_s=10)
        actors = client.list_state("actors", [("job_id", "=", str(job.job_id))]).rows
        pids = sorted({int(a["pid"]) for a in actors if a.get("pid") and a.get("state") == "ALIVE"})
        node = next(a["node_id"] for a in actors if a.get("node_id"))
        base = [sys.executable, "scripts/run_on_each_ray_node.py", "--address", cluster.gcs, "-n", node[:12],
                "--dump", ",".join(map(str, pids)), "--samples", "2"]
        OUT.mkdir(parents=True, exist_ok=True)
        env = localcluster.loopback_env()
        for name, extra in (("dump.txt", []), ("dump.json", ["--json"])):
            proc = subprocess.run(base + extra, cwd=ROOT, capture_output=True, text=True, timeout=180, env=env)
            (OUT / name).write_text(proc.stdout)
            print(f"{name}: rc {proc.returncode}, {len(proc.stdout)} chars; stderr: {proc.stderr[-300:]}")
        print("command:", " ".join(base[1:]))
        localcluster.stop_job(cluster, job)
    finally:
        localcluster.stop(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
