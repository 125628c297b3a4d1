"""A reranker's memory is reserved in a placement group, but the actor is created outside the group: it waits for the memory the group holds.

Scenario: the node has a `memory` resource of 4 GB (`ray start --memory`). The driver reserves
the reranker's memory up front, `pg = placement_group([{"CPU": 1, "memory": 3 * GB}])`, and waits
for `pg.ready()` ("so the index build cannot take it"). It then creates
`Reranker.options(num_cpus=1, memory=3 * GB).remote()` but forgets
`scheduling_strategy=PlacementGroupSchedulingStrategy(pg)`: the actor asks for 3 GB of the node's
free memory, of which only 1 GB is left outside the reservation. It stays PENDING_CREATION;
nothing runs in the group's bundle. The driver waits in `ray.get(reranker.score.remote(...))`.

Mechanism: an actor pending on a resource held by its own job's placement group that it was meant
to be scheduled into (created without the group's scheduling strategy).
Truth: hang; culprit the driver's `Reranker.options(num_cpus=1, memory=3 * GB).remote()` line (no
PlacementGroupSchedulingStrategy; the empty bundle holds the memory). Fix: pass
`scheduling_strategy=PlacementGroupSchedulingStrategy(pg)` (or drop the reservation).
"""
# redteam-ray-start: --memory=4000000000
import os
import time

import numpy as np
import ray
from ray.util.placement_group import placement_group

GB = 1000**3


@ray.remote
class Reranker:
    def __init__(self):
        self.w = np.random.default_rng(0).standard_normal((256, 64))

    def score(self, q: np.ndarray) -> list:
        return (q @ self.w).sum(axis=1).tolist()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pg = placement_group([{"CPU": 1, "memory": 3 * GB}])
    ray.get(pg.ready())
    reranker = Reranker.options(num_cpus=1, memory=3 * GB).remote()
    ref = reranker.score.remote(np.ones((8, 256)))
    time.sleep(8)
    print("READY reranker scoring", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
