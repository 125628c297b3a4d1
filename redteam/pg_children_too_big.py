"""A trial task in a placement group fans out child tasks that do not fit any of its bundles.

Mechanism: the driver reserves a placement group of two {"CPU": 1} bundles (a "trial") and runs
run_trial in it with placement_group_capture_child_tasks=True. run_trial submits rollout children
with num_cpus=2 (copied from a single-node config): captured children are scheduled in the group,
and no bundle has 2 CPUs, so they stay pending forever although the cluster has free CPUs outside
the group. run_trial waits in ray.get on them; driver in ray.get(run_trial).
Intended truth: culprit run_trial's children asking more than a bundle holds (num_cpus=2 vs
bundles of 1); fix: children num_cpus<=1 (or bundles of 2 CPUs, or don't capture child tasks).
Observed (Ray 2.60): NOT a hang. Ray checks the shape at submission and raises ValueError ("cannot
fit into any bundles for the placement group") in run_trial, so the job FAILS at once; kept as a
fail-fast check (the tool must say no-hang, job FAILED).
"""
import os
import time

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


@ray.remote(num_cpus=2)
def rollout(seed):
    time.sleep(0.2)
    return seed


@ray.remote(num_cpus=0.5)
def run_trial(n):
    return sum(ray.get([rollout.remote(s) for s in range(n)]))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pg = placement_group([{"CPU": 1}, {"CPU": 1}], strategy="PACK")
    ray.get(pg.ready())
    strat = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_capture_child_tasks=True)
    trial = run_trial.options(scheduling_strategy=strat).remote(4)
    print("READY: run_trial in a PG of {CPU:1}x2 fans out num_cpus=2 children", flush=True)
    print(ray.get(trial))


if __name__ == "__main__":
    main()
