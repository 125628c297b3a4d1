"""A trial actor in a placement group waits for tasks that need the bundle it holds itself.

Scenario
    A small hyperparameter sweep runs each trial in its own placement group, the way Ray Tune
    does: one bundle ``{"CPU": 1}`` per trial, and the trial's ``TrialRunner`` actor
    (``num_cpus=1``) is created into it with ``placement_group_capture_child_tasks=True``, "so
    that everything the trial starts stays inside its reservation". Each trial step fans its
    feature preprocessing out to ``preprocess`` tasks (default ``num_cpus=1``) and waits for
    them with ``ray.get``.

Mechanism
    Captured child tasks are scheduled into the trial's group: they ask for
    ``CPU_group_<id>`` (the group's bundle), not for the cluster's CPUs. The only bundle has one
    CPU and the runner itself holds it, blocked in ``ray.get`` on those very tasks (an actor
    keeps what it holds while it waits). The tasks stay ``PENDING_NODE_ASSIGNMENT`` forever,
    though three of the node's four CPUs are free: a starvation cycle inside one group.
    ``ray status`` shows ``1.0/4.0 CPU (1.0 used of 1.0 reserved in placement groups)`` and a
    pending ``{'CPU': 1.0}: 2+ pending tasks/actors (2+ using placement groups)``.

What misleads
    Three CPUs are free and the tasks are pending: a scheduler problem, or a request no node
    can satisfy (its resource name, ``CPU_group_<id>``, is on no node's resource list). Wrong:
    the request is for the group's bundle, and the runner that holds the bundle is waiting for
    the request. Nothing outside the group can help.

Expected diagnosis
    ``resource-starvation``: the driver waits for ``TrialRunner.step``; the runner waits in
    ``ray.get`` for ``preprocess`` tasks pending for ``{CPU: 1}`` of the trial's placement group,
    which the runner itself holds: a cycle. Culprit: ``TrialRunner``. Fix: give the group a
    bundle for the child tasks (or ``num_cpus=0`` on the runner), or do not capture child tasks
    that need their own CPUs.
"""

import os

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

EXPECTED = {
    "verdict": "hang",
    "pattern": "resource-starvation",
    "culprits": [{"class_name": "TrialRunner", "rank": None}],
    "notes": "the TrialRunner (num_cpus=1) holds its group's only bundle {CPU: 1} while in ray.get on "
    "preprocess tasks captured into the group (CPU_group_<id>: 1): PENDING_NODE_ASSIGNMENT with 3 of 4 CPUs "
    "free; a cycle inside one placement group.",
}


@ray.remote(num_cpus=1)
def preprocess(trial: int, shard: int) -> dict:
    return {"trial": trial, "shard": shard, "rows": 1000 + shard}


@ray.remote(num_cpus=1)
class TrialRunner:
    def __init__(self, trial: int, lr: float) -> None:
        self.trial, self.lr, self.steps = trial, lr, 0

    def ready(self) -> int:
        return self.trial

    def step(self) -> dict:
        shards = ray.get([preprocess.remote(self.trial, s) for s in range(2)])
        self.steps += 1
        return {"trial": self.trial, "rows": sum(s["rows"] for s in shards), "lr": self.lr}


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pg = placement_group([{"CPU": 1}], name="trial-0")
    ray.get(pg.ready(), timeout=60)
    strategy = PlacementGroupSchedulingStrategy(pg, placement_group_capture_child_tasks=True)
    runner = TrialRunner.options(scheduling_strategy=strategy).remote(0, 0.01)
    ray.get(runner.ready.remote(), timeout=120)
    print("READY: trial 0 step (preprocess tasks captured into its group)", flush=True)
    print(ray.get(runner.step.remote()), flush=True)


if __name__ == "__main__":
    main()
