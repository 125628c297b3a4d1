"""A healthy job with a long silent phase, for the watcher's tests (not a hang: no EXPECTED).

Trains steps (tasks finish, the loss is logged), then "checkpoints" for QUIET seconds inside an
actor without printing or finishing a task, then trains again and ends with exit 0.
Usage: python quiet_checkpoint.py QUIET_SECONDS [STEPS_BEFORE] [STEPS_AFTER]
"""

import os
import sys
import time

import ray


@ray.remote(num_cpus=0.1)
def step_task(step: int) -> float:
    time.sleep(0.2)
    return 1.0 / (step + 1)


@ray.remote(num_cpus=0.1)
class Checkpointer:
    def save(self, seconds: float) -> str:
        time.sleep(seconds)  # a slow write to remote storage: silent, but it ends
        return "ckpt-0"


def main() -> None:
    quiet = float(sys.argv[1])
    before = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    after = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ckpt = Checkpointer.remote()
    for step in range(before):
        print(f"step {step}: loss {ray.get(step_task.remote(step)):.4f}", flush=True)
    print(f"QUIET: checkpointing for {quiet:.0f}s", flush=True)
    name = ray.get(ckpt.save.remote(quiet))
    print(f"saved {name}", flush=True)
    for step in range(before, before + after):
        print(f"step {step}: loss {ray.get(step_task.remote(step)):.4f}", flush=True)
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
