"""A job with a long finished history and a few blocked tasks (past the State API's 10k-row limit).

Usage: python many_tasks_then_blocked.py N_FINISHED N_BLOCKED [CHUNK]

The driver first runs N_FINISHED tiny tasks to completion, CHUNK at a time (`ray.get` over each
chunk), then starts N_BLOCKED `waiter` tasks, each blocked in `ray.get` on `Gate.wait`, a call
that waits on a `threading.Event` nobody ever sets (`Gate` runs one call at a time: the first
waits on the event, the others queue behind it). The driver then waits on the waiters forever.
Root cause: `Gate.wait`; the waiters and the driver are its victims.

It prints `SETUP <seconds> <n> finished tasks` when the history is done and `READY` once the
waiters are submitted.
"""

import os
import sys
import threading
import time

import ray


@ray.remote
def tiny(i: int) -> int:
    return i


@ray.remote(num_cpus=0)
class Gate:
    def wait(self) -> None:
        threading.Event().wait()  # never set


@ray.remote(num_cpus=0)
def waiter(gate: "ray.actor.ActorHandle", i: int) -> int:
    ray.get(gate.wait.remote())
    return i


def main() -> None:
    n, k = int(sys.argv[1]), int(sys.argv[2])
    chunk = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    start = time.monotonic()
    done = 0
    pending = None
    for lo in range(0, n, chunk):
        # One chunk in flight while the previous one is collected: submission overlaps execution.
        refs = [tiny.remote(i) for i in range(lo, min(n, lo + chunk))]
        if pending is not None:
            done += len(ray.get(pending))
        pending = refs
        if lo // chunk % 10 == 0:
            print(f"progress {done} {time.monotonic() - start:.1f}s", flush=True)
    if pending is not None:
        done += len(ray.get(pending))
    print(f"SETUP {time.monotonic() - start:.1f} {done} finished tasks", flush=True)
    gate = Gate.remote()
    refs = [waiter.remote(gate, i) for i in range(k)]
    print("READY", flush=True)
    ray.get(refs)


if __name__ == "__main__":
    main()
