"""A sweep waits for a STRICT_SPREAD placement group on a one-node cluster: each bundle fits, the strategy never can.

Scenario: a hyper-parameter sweep's TrialController reserves a placement group of 2 bundles of
{CPU: 1} with strategy STRICT_SPREAD ("one data-parallel worker per node", copied from the
multi-node config) and waits in `ray.get(pg.ready())`. The cluster is a single node with 4 CPUs:
each bundle fits, 2 CPUs are free, yet STRICT_SPREAD needs two distinct nodes, so the group stays
PENDING (infeasible by strategy, not by size). The driver waits on the controller. Before that it
ran a few data-prep tasks that succeeded.

Mechanism: a placement group that can never be placed because of its strategy (STRICT_SPREAD with
more bundles than nodes), not its size.
Truth: culprit the placement group of TrialController (STRICT_SPREAD, 2 bundles, 1 node). Fix:
strategy SPREAD/PACK on one node, or a second node.
"""
import os

import ray
from ray.util.placement_group import placement_group


@ray.remote(num_cpus=0.5)
def prep_shard(i: int) -> int:
    return sum(range(i * 1000))


@ray.remote(num_cpus=0)
class TrialController:
    def start(self, lr: float) -> str:
        pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="STRICT_SPREAD", name="trial-0-workers")
        ray.get(pg.ready())
        return f"trial lr={lr} placed"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    print(sum(ray.get([prep_shard.remote(i) for i in range(4)])))
    ctl = TrialController.remote()
    ref = ctl.start.remote(3e-4)
    print("READY sweep started", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
