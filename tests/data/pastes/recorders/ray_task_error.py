#!/usr/bin/env python3
"""Record the traceback a Ray driver prints when a remote call raised (RayTaskError).

Starts a loopback cluster on PORT (debug_hang.localcluster, stopped at the end) and runs
ray_task_error_job.py; OUT/driver.log is the driver's stdout+stderr.

Usage: python ray_task_error.py OUT_DIR [--port 6407]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--port", type=int, default=6407)
    args = parser.parse_args()
    from debug_hang import localcluster

    os.makedirs(args.out, exist_ok=True)
    cluster = localcluster.start(args.port, num_cpus=2)
    try:
        with open(os.path.join(args.out, "driver.log"), "w") as log:
            proc = subprocess.run([sys.executable, os.path.join(HERE, "ray_task_error_job.py")],
                                  stdout=log, stderr=subprocess.STDOUT, env=cluster.env(), cwd=HERE,
                                  timeout=180, check=False)
        print("driver rc", proc.returncode)
    finally:
        localcluster.stop(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
