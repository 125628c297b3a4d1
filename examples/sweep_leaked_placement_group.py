"""A sweep whose finished trial never removed its placement group; the next trial waits forever.

Scenario
    A hand-rolled hyperparameter sweep: for each trial the driver reserves one bundle per
    worker in a placement group (``PACK``), waits for it with ``ray.get(pg.ready())``, starts
    ``TrialWorker`` actors inside it, collects their results and stops the trial. Stopping kills
    the trial's actors (``ray.kill``) but never calls ``remove_placement_group``.

Mechanism
    Each trial asks for ``cluster CPUs - 1`` CPUs (3 on this 4-CPU cluster). Trial 0 runs and
    ends; its actors are DEAD, but its group stays ``CREATED`` and keeps its 3 CPUs reserved —
    reserved, not used: ``ray status`` shows ``0.0/3.0 CPU`` "used of reserved in placement
    groups", and ``1.0/4.0`` free. Trial 1's group needs 3 CPUs, so it stays ``PENDING`` with
    scheduling state ``NO_RESOURCES``: feasible on this cluster, never placed. Nothing fails.

What misleads
    The pending group ``trial-1`` and the driver in ``pg.ready()`` are the visible waiters, and
    ``ray status`` reads "0.0 used of 3.0 reserved": the CPUs look free, so blaming the waiting
    group or adding nodes is tempting. Wrong: trial 0's group is CREATED with only DEAD actors
    and holds the CPUs; removing it frees them.

Expected diagnosis
    ``placement-group-leaked``: the holder, not the waiting group. The driver waits in
    ``pg.ready()`` for ``trial-1``; ``trial-1`` is PENDING because group ``trial-0`` (created by
    this job, CREATED, no ALIVE actor and no RUNNING task in it since trial 0 ended) holds the
    CPUs. Fix: ``ray.util.remove_placement_group`` for ``trial-0`` (and remove each trial's
    group when the trial stops).
"""

import os

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

EXPECTED = {
    "verdict": "hang",
    "pattern": "placement-group-leaked",
    "culprits": [{"class_name": "trial-0", "rank": None}],
    "notes": "trial 0's placement group (3 x {'CPU': 1}) is CREATED with its actors killed and never "
    "removed; trial 1's group needs 3 CPUs of the 4-CPU cluster and stays PENDING (NO_RESOURCES); "
    "the driver waits in ray.get(pg.ready()).",
}

TRIALS = [{"lr": 0.1}, {"lr": 0.01}, {"lr": 0.001}]


@ray.remote(num_cpus=1)
class TrialWorker:
    def __init__(self, trial: int, rank: int, config: dict):
        self.trial, self.rank, self.config = trial, rank, config

    def train(self, steps: int) -> float:
        loss = 1.0
        for _ in range(steps):
            loss *= 1.0 - self.config["lr"]
        return loss


def run_trial(trial: int, config: dict, workers_per_trial: int) -> float:
    pg = placement_group([{"CPU": 1}] * workers_per_trial, strategy="PACK", name=f"trial-{trial}")
    print(f"[sweep] trial {trial}: waiting for {workers_per_trial} CPUs", flush=True)
    ray.get(pg.ready())
    workers = [
        TrialWorker.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=pg, placement_group_bundle_index=i)).remote(trial, i, config)
        for i in range(workers_per_trial)
    ]
    losses = ray.get([w.train.remote(100) for w in workers])
    for w in workers:  # stop the trial: the actors go, the reservation stays
        ray.kill(w)
    return min(losses)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    workers_per_trial = max(2, int(ray.cluster_resources().get("CPU", 4)) - 1)
    results = []
    for trial, config in enumerate(TRIALS):
        if trial == 1:
            print(f"READY: trial 1 waits in pg.ready() for {workers_per_trial} CPUs", flush=True)
        results.append(run_trial(trial, config, workers_per_trial))
        print(f"[sweep] trial {trial} done: loss {results[-1]:.4f}", flush=True)
    print(f"best trial: {min(range(len(results)), key=results.__getitem__)}", flush=True)


if __name__ == "__main__":
    main()
