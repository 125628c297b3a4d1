"""Healthy: a trial's placement group waits for CPUs held by the previous trial's task, which is computing and will finish.

Scenario: a small sweep runs trials one after another on a 4-CPU node. Trial 0 is a 3-CPU task
(silent numpy training: matmuls for ~3 minutes). Once trial 0 runs (the controller checks its
state), the controller asks for trial 1's placement group ({CPU: 2}) and waits in
`ray.get(pg.ready())`: only 1 CPU is free, so the group
is PENDING, and `ray status` lists the demand. When trial 0's task returns, its 3 CPUs are freed,
the group is placed and trial 1 runs (quickly).

Mechanism (none: healthy): a pending resource demand whose holder is a running, CPU-busy task
that finishes.
Truth: no hang. A right diagnosis says no-hang or inconclusive ("waits for trial 0, which is
running"); a hang naming the placement group, the controller or trial 0 is a false hang.
"""
# redteam-settle: 25
import os
import time

import numpy as np
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
from ray.util.state import list_tasks


@ray.remote(num_cpus=3)
def trial0(steps: int) -> float:
    rng = np.random.default_rng(0)
    w = rng.random((400, 400))
    loss = 0.0
    for _ in range(steps):
        x = rng.random((400, 400))
        w = np.tanh(w @ x / 400.0)
        loss = float(w.mean())
    return loss


@ray.remote(num_cpus=1)
def trial1_worker(i: int) -> int:
    return i * i


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    t0 = trial0.remote(9000)
    while not list_tasks(filters=[("name", "=", "trial0"), ("state", "=", "RUNNING")]):
        time.sleep(1)
    pg = placement_group([{"CPU": 2}], name="trial-1")
    print("READY sweep running", flush=True)
    ray.get(pg.ready())
    print("trial 0 loss", ray.get(t0), flush=True)
    strat = PlacementGroupSchedulingStrategy(placement_group=pg)
    print(ray.get([trial1_worker.options(scheduling_strategy=strat).remote(i) for i in range(2)]))
    ray.util.remove_placement_group(pg)


if __name__ == "__main__":
    main()
