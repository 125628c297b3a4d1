"""Two trials each hold a placement group and wait for a second one: hold-and-wait on bundles.

Scenario: a small sweep runs two trials on a 4-CPU cluster. Each Trial actor (0 CPU) first
`reserve()`s a 2-CPU placement group for its parameter server and data loader, then `run()`
creates a second 2-CPU placement group for its two workers and waits `ray.get(pg.ready())`
before starting them. The driver reserves for both trials first, then runs both. All 4 CPUs are
in the two first groups; both second groups stay PENDING. Nothing in either first group runs
(the bundles are reserved, empty).

Mechanism: a resource deadlock by incremental gang reservation: each trial holds bundles while
waiting for more, and what it waits for is held by the other (a cycle through the scheduler).
Truth: culprits both Trial actors (each holds the group the other needs), i.e. the two-phase
reservation. Fix: reserve everything a trial needs in one placement group (atomic), or limit
concurrent trials to what fits.
"""
import os

import ray
from ray.util.placement_group import placement_group


@ray.remote(num_cpus=0)
class Trial:
    def __init__(self, name: str):
        self.name = name

    def reserve(self) -> str:
        self.infra = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK", name=f"{self.name}-infra")
        ray.get(self.infra.ready())
        return self.name

    def run(self) -> str:
        workers = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK", name=f"{self.name}-workers")
        ray.get(workers.ready())
        return f"{self.name} done"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trials = [Trial.remote(f"trial-{i}") for i in range(2)]
    ray.get([t.reserve.remote() for t in trials])
    refs = [t.run.remote() for t in trials]
    print("READY trials running", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
