"""An async weight store awaits weights that the trainer published to another instance.

Scenario
    Off-policy RL: a ``Learner`` publishes policy weights to an async ``WeightStore`` actor;
    ``Rollout`` actors fetch them with ``ray.get(store.get_weights.remote(min_version))``.
    ``get_weights`` awaits an ``asyncio.Event`` that ``set_weights`` sets, so rollouts block
    until the first weights exist.

Mechanism
    A refactor moved store creation into a helper, ``make_store()``, that the learner setup and
    the rollout setup each call: two ``WeightStore`` actors. The learner publishes to its own
    store; the rollout's store never gets ``set_weights``. Its ``get_weights`` coroutine awaits
    the event forever: the actor's event loop is idle (py-spy shows only ``select``; a coroutine
    in ``await`` has no stack) and the method RUNNING. The rollout waits in ``ray.get``, the
    driver on the rollout.

What misleads
    The WeightStore's loop is idle and the Learner did call ``set_weights``, so the store looks
    healthy and the rollout looks slow. Wrong: there are two WeightStore actors; the rollout's
    instance never got weights and its ``get_weights`` awaits an ``asyncio.Event`` nothing sets
    - a coroutine in ``await`` has no stack, only the RUNNING task shows it.

Expected diagnosis
    ``async-await-stuck``: WeightStore (the rollout's instance) runs ``get_weights``, its loop
    idle, no Ray call of its own unfinished: it awaits an asyncio object nothing resolves.
    Chain: driver → Rollout → WeightStore.
"""

import asyncio
import os

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "async-await-stuck",
    "culprits": [{"class_name": "WeightStore", "rank": None}],
    "notes": "two WeightStore instances: the learner publishes to one, the rollout awaits an "
    "asyncio.Event on the other; async actor with an idle loop and a RUNNING method.",
}


@ray.remote(num_cpus=0.25)
class WeightStore:
    def __init__(self):
        self.version = 0
        self.weights = None
        self.updated = asyncio.Event()

    async def set_weights(self, weights: list, version: int) -> int:
        self.weights, self.version = weights, version
        self.updated.set()
        return version

    async def get_weights(self, min_version: int) -> tuple:
        while self.version < min_version:
            self.updated.clear()
            await self.updated.wait()
        return self.version, self.weights


def make_store():
    return WeightStore.remote()


@ray.remote(num_cpus=0.25)
class Learner:
    def __init__(self):
        self.store = make_store()
        self.weights = [0.0] * 4

    def publish(self, version: int) -> int:
        self.weights = [w + 0.1 for w in self.weights]
        return ray.get(self.store.set_weights.remote(self.weights, version))


@ray.remote(num_cpus=0.25)
class Rollout:
    def __init__(self):
        self.store = make_store()

    def collect(self, min_version: int) -> dict:
        version, weights = ray.get(self.store.get_weights.remote(min_version))
        return {"version": version, "episodes": [sum(weights)] * 4}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    learner = Learner.remote()
    rollout = Rollout.remote()
    print(f"published version {ray.get(learner.publish.remote(1))}", flush=True)
    print("READY: collecting with policy version >= 1", flush=True)
    print(ray.get(rollout.collect.remote(1)), flush=True)


if __name__ == "__main__":
    main()
