#!/usr/bin/env python3
"""Record a hung Ray job's driver output as a user would copy it from the terminal.

Starts a loopback cluster on PORT (debug_hang.localcluster, stopped at the end), runs
ray_worker_logs_job.py as the driver, waits until both actors block, `py-spy dump`s each actor
(OUT/actor-<pid>.txt), sends SIGUSR1 to both (their faulthandler stacks reach the driver's stderr
prefixed `(RayTrainWorker pid=N)`), then SIGINT to the driver (its KeyboardInterrupt traceback
through ray.get). OUT/driver.log is the driver's stdout+stderr.

Usage: python ray_worker_logs.py OUT_DIR [--port 6407]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

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
        log = open(os.path.join(args.out, "driver.log"), "w")
        driver = subprocess.Popen([sys.executable, "-u", os.path.join(HERE, "ray_worker_logs_job.py")],
                                  stdout=log, stderr=subprocess.STDOUT, env=cluster.env(), cwd=HERE)
        pids: list[int] = []
        for _ in range(120):
            time.sleep(1)
            with open(os.path.join(args.out, "driver.log")) as fh:
                for line in fh:
                    if line.startswith("PIDS "):
                        pids = [int(p) for p in line.split()[1:]]
            if pids:
                break
        time.sleep(4)
        pyspy = os.path.join(os.path.dirname(sys.executable), "py-spy")
        for pid in pids:
            with open(os.path.join(args.out, f"actor-{pid}.txt"), "w") as fh:
                subprocess.run([pyspy, "dump", "--pid", str(pid)], stdout=fh, stderr=subprocess.STDOUT,
                               timeout=30, check=False)
        for pid in pids:
            os.kill(pid, signal.SIGUSR1)
        time.sleep(4)
        driver.send_signal(signal.SIGINT)
        try:
            driver.wait(timeout=30)
        except subprocess.TimeoutExpired:
            driver.kill()
            driver.wait()
        log.close()
        print("driver rc", driver.returncode, "actors", pids)
    finally:
        localcluster.stop(cluster)
    return 0


if __name__ == "__main__":
    sys.exit(main())
