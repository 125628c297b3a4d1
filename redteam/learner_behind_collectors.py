"""A 3-CPU learner that stays pending: experience collectors created after it took the CPUs it waits for.

Scenario: an IMPALA-style job starts 2 ExperienceCollector actors (1 CPU each), then the Learner
(num_cpus=3: "it does the SGD") which cannot fit yet (2 CPUs free), then -- to "use the idle
CPUs while the learner comes up" -- 2 more collectors, which fit and take the last 2 CPUs. Ray
does not reserve CPUs for a pending actor, so the Learner stays PENDING_CREATION forever. The
collectors idle-poll the learner's weights (a named actor lookup every second, quietly); the
driver waits in ray.get on Learner.train().

Mechanism: a pending actor whose resources are held by actors created after it (and before
it): unmet demand {CPU: 3} with 4/4 CPUs held by 4 ALIVE, idle collectors.
Truth: culprit the 4 ExperienceCollector actors (hold every CPU; the 2 created after the Learner
took the CPUs it was waiting for). Fix: create the learner first and wait for it
(ray.get(learner.ready.remote())), or a placement group for learner + collectors, or
num_cpus <= 0.5 for the collectors.
"""
import os
import time

import ray


@ray.remote(num_cpus=1)
class ExperienceCollector:
    def __init__(self, idx: int):
        self.idx = idx
        self.buffer: list[tuple[int, float]] = []

    def collect(self, steps: int) -> int:
        for t in range(steps):
            self.buffer.append((t, 0.01 * t))
        return len(self.buffer)


@ray.remote(num_cpus=3)
class Learner:
    def train(self, updates: int) -> float:
        return float(updates)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    collectors = [ExperienceCollector.remote(i) for i in range(2)]
    ray.get([c.collect.remote(10) for c in collectors])
    learner = Learner.remote()
    time.sleep(1)
    collectors += [ExperienceCollector.remote(i) for i in range(2, 4)]
    ray.get([c.collect.remote(10) for c in collectors])
    ref = learner.train.remote(100)
    print("READY learner.train submitted", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
