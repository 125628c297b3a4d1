"""Data-parallel workers pinned to placement-group bundles by a wrong index: two share bundle 0, bundle 1 stays free.

Scenario: a trainer reserves a placement group of two {"CPU": 1} bundles (PACK) and starts one
worker per bundle, pinning each with `PlacementGroupSchedulingStrategy(pg,
placement_group_bundle_index=rank // 2)` — the index formula was written for two workers per
bundle (an earlier layout with 2-CPU bundles). Both workers ask for bundle 0; worker 0 gets it and
keeps it (an actor holds its bundle for its lifetime), worker 1 stays PENDING_CREATION although the
group has a free bundle and the cluster free CPUs: a pinned bundle index is a hard constraint.
The driver waits on both workers' first step.

Mechanism: an actor pinned to a placement-group bundle that another live actor of the job holds,
while the group's other bundle is free: pending on a bundle, not on the cluster's capacity.
Truth: hang; culprit the bundle index pin of worker 1 (`placement_group_bundle_index=rank // 2` in
main; worker 0, idle, holds bundle 0). Fix: `placement_group_bundle_index=rank` (or -1: any bundle).
"""
import os
import time

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_cpus=1)
class Worker:
    def __init__(self, rank):
        self.rank = rank

    def step(self):
        return self.rank


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK")
    ray.get(pg.ready())
    workers = [Worker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        pg, placement_group_bundle_index=rank // 2)).remote(rank) for rank in range(2)]
    refs = [w.step.remote() for w in workers]
    time.sleep(8)
    print("READY: worker 1 pinned to bundle 0 (held by worker 0); bundle 1 free", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
