"""Healthy: a sweep launcher waits for its placement group while a cache-warming task it started computes; the task ends and the group is placed.

Scenario: on a 4-CPU node, SweepLauncher (num_cpus=1) first starts `warm_cache` (num_cpus=2, ~3.5 min
of numpy) without waiting for it, then reserves the trial gang `placement_group([{"CPU": 1}] * 2)`
and waits in `ray.get(pg.ready())`. Free: 4 - 1 - 2 = 1 CPU, so the group is PENDING until
warm_cache returns; then its 2 CPUs are freed, the group is placed and the trials run.

Mechanism (none: healthy): a placement group pending behind a running, CPU-busy task of the same
actor's making that finishes by itself.
Truth: no hang; no-hang or inconclusive (warm_cache computes) is right; a hang is a false hang.
"""
import os
import time

import numpy as np
import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_cpus=2)
def warm_cache(seconds: float) -> int:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 256))
    end, n = time.time() + seconds, 0
    while time.time() < end:
        a = np.tanh(a @ a / 256.0)
        n += 1
    return n


@ray.remote(num_cpus=1)
def trial(cfg: dict) -> float:
    return sum(i * cfg["lr"] for i in range(100_000))


@ray.remote(num_cpus=1)
class SweepLauncher:
    def __init__(self, space: list):
        self.space = space

    def launch(self) -> list:
        self.warm = warm_cache.remote(210)
        time.sleep(2)
        pg = placement_group([{"CPU": 1}] * len(self.space), strategy="PACK")
        ray.get(pg.ready())
        refs = [trial.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                    pg, placement_group_bundle_index=i)).remote(cfg) for i, cfg in enumerate(self.space)]
        return ray.get(refs)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    launcher = SweepLauncher.remote([{"lr": 1e-3}, {"lr": 3e-3}])
    ref = launcher.launch.remote()
    time.sleep(8)
    print("READY sweep launched", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
