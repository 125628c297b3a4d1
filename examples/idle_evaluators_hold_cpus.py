"""An evaluator pool started up front holds the CPUs the training step needs.

Scenario
    A training script starts its evaluation pool first ("so that it is warm when we need it"):
    three ``Evaluator`` actors with ``num_cpus=1`` each, pinged once to load their metric
    tables. Then it loads the dataset and submits the training step, a task that asks for
    ``num_cpus=2`` (it runs two intra-op threads), and waits for it with ``ray.get``.

Mechanism
    Actors keep the CPUs they reserved for their whole life, busy or not. The three idle
    evaluators hold 3.0 of the cluster's 4 CPUs; the training task needs 2, is feasible on this
    node, and stays ``PENDING_NODE_ASSIGNMENT`` forever. The evaluators are ALIVE with no task
    running or queued on them, so nobody is blocked in a cycle: the starvation is by idle
    holders. ``ray status`` shows ``3.0/4.0 CPU`` and a pending ``{'CPU': 2.0}`` demand; no
    event, no warning.

What misleads
    ``ray status`` shows a pending ``{'CPU': 2.0}`` demand and most CPUs used, so adding nodes
    or blaming the scheduler is tempting; so is naming the pending training task (the victim).
    Wrong: the CPUs are held by ALIVE actors that run nothing. The holder is the culprit:
    release it, or create the pool only when it is needed.

Expected diagnosis
    ``idle-actor-holds-resources``: the driver waits in ``ray.get`` for ``train_step``, pending
    for ``{CPU: 2}``; the culprits are the idle ``Evaluator`` actors (each holds ``{CPU: 1}``,
    no task on it since its ping). Fix: create the pool when it is needed, kill it when done, or
    ``num_cpus=0`` for actors that mostly wait.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "idle-actor-holds-resources",
    "culprits": [{"class_name": "Evaluator", "rank": None}],
    "notes": "3 idle Evaluator actors (num_cpus=1) hold 3.0/4.0 CPU; train_step (num_cpus=2) stays "
    "PENDING_NODE_ASSIGNMENT; the driver waits in ray.get on it.",
}


@ray.remote(num_cpus=1)
class Evaluator:
    def __init__(self, shard: int):
        self.shard = shard
        self.table: dict = {}

    def ping(self) -> int:
        self.table = {i: i * i for i in range(1000)}
        return self.shard

    def evaluate(self, weights: list) -> float:
        return sum(w * self.table.get(i, 0) for i, w in enumerate(weights))


@ray.remote(num_cpus=2)
def train_step(batch: list) -> list:
    return [x * 0.5 for x in batch]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pool = [Evaluator.remote(i) for i in range(3)]
    print(f"evaluator pool warm: {ray.get([e.ping.remote() for e in pool])}", flush=True)
    time.sleep(6)  # loading the dataset
    batch = [float(i) for i in range(64)]
    print("READY: train_step (num_cpus=2) submitted while 3 Evaluators hold 3 CPUs", flush=True)
    weights = ray.get(train_step.remote(batch))
    print(f"eval: {ray.get([e.evaluate.remote(weights) for e in pool])}", flush=True)


if __name__ == "__main__":
    main()
