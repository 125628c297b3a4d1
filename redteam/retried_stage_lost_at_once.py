# redteam-ray-start: --resources='{"accelerator": 2}'
"""A retried task waits for the accelerators its first attempt reserved, lost before it ever reported running.

Scenario
    ``train_stage`` (``max_retries=2``) reserves the node's two accelerators with an unnamed
    placement group and its worker is lost the moment the group is ready (a preemption, an OOM
    kill), before any loader starts.

Mechanism
    As in examples/retried_stage_leaks_group.py, the group outlives the worker and the retry
    waits in ``pg.ready()`` for the same two accelerators. But the lost attempt never reported
    RUNNING: a worker flushes its task events once a second, and it died sooner. Its FAILED row
    has no ``start_time_ms``, only the owner's ``creation_time_ms``; and no actor was ever
    placed in the group.

Expected diagnosis
    ``placement-group-leaked``, culprit the group known by ``train_stage`` (the attempt that
    requested it then FAILED), not an anonymous group id.
"""

import os
import time

import ray
from ray.util.placement_group import placement_group


@ray.remote(num_cpus=0, max_retries=2)
def train_stage(lost_marker: str) -> str:
    pg = placement_group([{"accelerator": 1}] * 2)
    ray.get(pg.ready())
    if not os.path.exists(lost_marker):  # lost at once, the first time only
        open(lost_marker, "w").close()
        os._exit(1)
    return "trained"


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    marker = f"/tmp/retried_stage_lost_at_once_{os.getpid()}_{time.time_ns()}"
    ref = train_stage.remote(marker)
    while not any(pg["state"] == "PENDING" for pg in ray.util.placement_group_table().values()):
        time.sleep(0.5)
    print("READY: train_stage retried after its first worker was lost at once", flush=True)
    print(ray.get(ref), flush=True)


if __name__ == "__main__":
    main()
