"""A driver with Ray's default logging threads and a pooled worker left idle (`ray::IDLE`).

Runs one short task so its worker returns to the pool, then blocks in `time.sleep`. Writes
"<driver pid> <idle worker pid>" to `--ready`.
"""

from __future__ import annotations

import argparse
import os
import time

import ray


@ray.remote
def whoami() -> int:
    return os.getpid()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("--lifetime", type=float, default=300.0)
    args = parser.parse_args()
    ray.init(address=args.address, namespace="parse-capture-idle")  # log_to_driver on: print_logs
    worker = ray.get(whoami.remote())
    time.sleep(2.0)  # the worker goes back to the pool and retitles itself ray::IDLE
    with open(args.ready, "w", encoding="ascii") as fh:
        fh.write(f"{os.getpid()} {worker}")
    time.sleep(args.lifetime)


if __name__ == "__main__":
    main()
