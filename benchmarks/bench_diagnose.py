#!/usr/bin/env python3
"""Time the whole diagnosis (address → report) on real hung examples.

Starts a loopback cluster (own ports, temp dir; killed afterwards, never `ray stop`), submits each
example, waits until it is hung, then times `scripts/diagnose_ray_hang.sh` as a user runs it (fresh
interpreter) and `diagnose.run()` in-process, REPEAT times each. Prints a table (or --json).
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

from debug_hang import localcluster  # noqa: E402
from debug_hang.pipeline import Options, run  # noqa: E402

DEFAULT_EXAMPLES = ["producer_never_produces", "actor_call_cycle", "gloo_skipped_allreduce"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("examples", nargs="*", default=DEFAULT_EXAMPLES, help="examples to time")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per example and path (default 3)")
    p.add_argument("--port", type=int, default=6470, help="GCS port of the benchmark cluster (default 6470)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    cluster = localcluster.start(args.port, num_cpus=4)
    rows = []
    try:
        for example in args.examples:
            job = localcluster.submit_example(cluster, example)
            script, inproc, verdicts = [], [], set()
            for i in range(args.repeat):
                with tempfile.TemporaryDirectory() as tmp:
                    start = time.monotonic()
                    subprocess.run([str(ROOT / "scripts" / "diagnose_ray_hang.sh"), cluster.gcs, tmp, "--job-id",
                                    str(job.job_id)], check=True, capture_output=True, env=cluster.env(), timeout=300)
                    script.append(time.monotonic() - start)
                    verdicts.add(json.loads((Path(tmp) / "diagnosis.json").read_text())["verdict"])
                start = time.monotonic()
                diag = run(Options(address=cluster.gcs, job_id=job.job_id))
                inproc.append(time.monotonic() - start)
                verdicts.add(diag.verdict)
                print(f"{example} run {i + 1}: script {script[-1]:.2f}s, in-process {inproc[-1]:.2f}s", file=sys.stderr)
            localcluster.stop_job(cluster, job)
            rows.append({"example": example, "script_median_s": round(statistics.median(script), 2),
                         "in_process_median_s": round(statistics.median(inproc), 2),
                         "processes": len({(p.node_id, p.pid) for p in diag.collection.processes}),
                         "verdicts": sorted(verdicts)})
    finally:
        localcluster.stop(cluster)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'example':<26} {'script s':>9} {'in-process s':>13} {'processes':>10}  verdicts")
        for r in rows:
            print(f"{r['example']:<26} {r['script_median_s']:>9.2f} {r['in_process_median_s']:>13.2f} "
                  f"{r['processes']:>10}  {','.join(r['verdicts'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
