"""Actors' constructors poll for a named actor that the driver creates only after they are ready.

Scenario: each Trainer's __init__ looks up the run's configuration actor by name, retrying
every 0.5 s while `ray.get_actor` raises ValueError ("config store not up yet"). The driver
creates the two trainers, then waits for them (`ray.get([t.ready.remote() ...])`), and only then
creates the named ConfigStore. The constructors never finish, so `ready` never runs, so the
driver never reaches the line that creates the store.

Mechanism: an ordering deadlock through a name lookup: pollers wait for an object whose creator
waits for the pollers.
Truth: culprit the driver (creates `exp7-config` after waiting on the actors whose construction
needs it; its stack is at the ray.get of ready()); the Trainers polling in __init__ are victims.
Fix: create the named actor first (or pass its handle to the constructors).
"""
import os
import time

import ray


@ray.remote(num_cpus=0.1)
class ConfigStore:
    def get(self, key: str) -> float:
        return {"lr": 3e-4}.get(key, 0.0)


@ray.remote(num_cpus=0.1)
class Trainer:
    def __init__(self, run: str):
        while True:
            try:
                self.config = ray.get_actor(f"{run}-config")
                break
            except ValueError:
                time.sleep(0.5)
        self.lr = ray.get(self.config.get.remote("lr"))

    def ready(self) -> bool:
        return True

    def fit(self) -> float:
        return self.lr


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainers = [Trainer.remote("exp7") for _ in range(2)]
    print("READY waiting for trainers", flush=True)
    ray.get([t.ready.remote() for t in trainers])
    ConfigStore.options(name="exp7-config").remote()
    print(ray.get([t.fit.remote() for t in trainers]))


if __name__ == "__main__":
    main()
