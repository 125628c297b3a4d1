"""Actors' constructors poll for a named actor that the driver creates once its own preparation ends (healthy).

Scenario: as trainer_config_lookup, each Trainer's __init__ retries `ray.get_actor("exp8-config")`
every 0.5 s while it raises ValueError. The driver creates the two trainers, then prepares the
run's configuration itself — a silent CPU-bound computation of about two minutes — and only then
creates the named ConfigStore and waits for the trainers, whose constructors then finish.

Mechanism: a poll for a name that a live process of the job will create: the pollers wait on the
driver's work, which moves on its own.
Truth: healthy (the job finishes after the driver's computation); no culprit. A right diagnosis
is no-hang or inconclusive; calling it a hang (the pollers, or the driver waiting on them) is a
false hang.
"""
import hashlib
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


def prepare_config(seconds: float) -> bytes:
    digest = b"exp8"
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        digest = hashlib.sha256(digest * 64).digest()
    return digest


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainers = [Trainer.remote("exp8") for _ in range(2)]
    print("READY preparing the config", flush=True)
    prepare_config(120.0)
    ConfigStore.options(name="exp8-config").remote()
    print(ray.get([t.ready.remote() for t in trainers]))


if __name__ == "__main__":
    main()
