"""A sweep launcher actor reserves CPUs for itself, then waits for a placement group that needs all of the node's CPUs.

Scenario: on a 4-CPU node, the driver creates SweepLauncher with num_cpus=2 ("bookkeeping and the
results writer need a couple of cores"). `launch()` reserves the trial gang:
`placement_group([{"CPU": 1}] * 4, strategy="PACK")` and waits in `ray.get(pg.ready())` before
starting the trial workers. The group is feasible on the cluster (4 CPUs) but 2 of them are held by
the launcher itself while it waits: the group stays PENDING forever. The driver waits on launch().

Mechanism: hold-and-wait on a placement group: the waiter for the group holds the resources the
group needs (nothing else runs in the job).
Truth: hang; culprit SweepLauncher (num_cpus=2 held while `ray.get(pg.ready())` in launch); fix:
create the launcher with num_cpus=0 (it only waits and writes results), or size the gang to what
is left (3 bundles).
"""
import os
import time

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_cpus=1)
def trial(cfg: dict) -> float:
    return sum(i * cfg["lr"] for i in range(100_000))


@ray.remote(num_cpus=2)
class SweepLauncher:
    def __init__(self, space: list):
        self.space = space
        self.results: dict = {}

    def launch(self) -> dict:
        pg = placement_group([{"CPU": 1}] * len(self.space), strategy="PACK")
        ray.get(pg.ready())
        refs = [trial.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i))
                .remote(cfg) for i, cfg in enumerate(self.space)]
        for cfg, r in zip(self.space, ray.get(refs), strict=True):
            self.results[cfg["lr"]] = r
        return self.results


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    space = [{"lr": lr} for lr in (1e-4, 3e-4, 1e-3, 3e-3)]
    launcher = SweepLauncher.remote(space)
    ref = launcher.launch.remote()
    time.sleep(8)
    print("READY sweep launched", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
