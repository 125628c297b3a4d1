"""A parent that waits on a Python child: the shape `py-spy dump --subprocesses` is for.

The parent blocks in `Popen.wait`; the child (this file with `--child`) sleeps in `child_work`
with one extra named thread. Writes the parent pid to `--ready` once the child is up.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time


def child_work(lifetime: float) -> None:
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline:
        time.sleep(0.2)


def heartbeat() -> None:
    while True:
        time.sleep(1.0)


def run_child(lifetime: float) -> None:
    threading.Thread(target=heartbeat, name="child-heartbeat", daemon=True).start()
    child_work(lifetime)


def run_parent(ready: str, lifetime: float) -> None:
    child = subprocess.Popen([sys.executable, __file__, "--child", "--lifetime", str(lifetime)])
    time.sleep(1.0)  # the child imports and starts its thread
    with open(ready, "w", encoding="ascii") as fh:
        fh.write(str(os.getpid()))
    wait_for_child(child)


def wait_for_child(child: subprocess.Popen[bytes]) -> None:
    child.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ready", default="")
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--lifetime", type=float, default=60.0)
    args = parser.parse_args()
    if args.child:
        run_child(args.lifetime)
    else:
        run_parent(args.ready, args.lifetime)


if __name__ == "__main__":
    main()
