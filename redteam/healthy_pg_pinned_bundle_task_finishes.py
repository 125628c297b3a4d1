"""Healthy: an actor pinned to a placement-group bundle a running task holds; the task finishes.

Scenario: a trainer reserves a placement group of two {"CPU": 1} bundles (PACK). A warm-up task
pinned to bundle 0 (`placement_group_bundle_index=0`) computes for ~4 minutes (a numpy loop, its
counter advancing); right after, a Worker actor is created pinned to bundle 0 too and stays
PENDING_CREATION behind it, although bundle 1 is free. The driver waits on the Worker's step.

Mechanism (none: healthy): a demand pinned to a full bundle whose holder is a task that ends: when
it returns, bundle 0 frees and the Worker is placed (the twin of pg_bundle_index_collision, whose
holder is an actor that never releases its bundle).
Truth: no hang. A right diagnosis is no-hang or inconclusive; a hang naming the bundle pin, the
task or the Worker is a false hang.
"""
# redteam-settle: 25
import os
import time

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_cpus=1)
def warm_up(seconds: float) -> int:
    import numpy as np

    rng = np.random.default_rng(0)
    m = rng.standard_normal((200, 200))
    it = 0
    end = time.time() + seconds
    while time.time() < end:
        m = np.tanh(m @ m.T / 200.0)
        it += 1
    return it


@ray.remote(num_cpus=1)
class Worker:
    def step(self):
        return 1


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK")
    ray.get(pg.ready())
    pin = PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=0)
    warm = warm_up.options(scheduling_strategy=pin).remote(240.0)
    time.sleep(2)
    worker = Worker.options(scheduling_strategy=pin).remote()
    ref = worker.step.remote()
    time.sleep(8)
    print("READY: warm_up computes in bundle 0; Worker pinned to bundle 0 waits; bundle 1 free", flush=True)
    print(ray.get([warm, ref]))


if __name__ == "__main__":
    main()
