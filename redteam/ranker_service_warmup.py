"""Serve replicas hold every CPU while their constructors wait for warm-up tasks that need a CPU.

Scenario: a Ranker deployment with 4 replicas, each reserving 1 CPU (ray_actor_options) on a
4-CPU cluster. Each replica's __init__ loads its index shard with `ray.get(load_shard.remote(i))`;
load_shard is a task that needs 1 CPU. The replicas (actors blocked in ray.get keep their CPUs)
hold all four CPUs; the four load_shard tasks stay pending; the replicas never finish
initialising; `serve.run` in the driver waits for the application to be RUNNING, forever.

Mechanism: resource starvation inside Serve: replica constructors (holding the CPUs) wait for
tasks that need CPUs.
Truth: culprit the 4 Ranker replicas (ServeReplica:ranker:Ranker actors in __init__, holding 4 CPU
while waiting on load_shard); the pending load_shard tasks and the driver in serve.run are
victims. Fix: load inside the replica (no nested task), give the task num_cpus=0 or the replicas
fewer CPUs.
"""
# redteam-settle: 20
# redteam-ray-start: --resources='{"serve_warmup":1}'
import os

import ray
from ray import serve


@ray.remote(num_cpus=1)
def load_shard(seed: int) -> list[int]:
    return [seed * 7 + i for i in range(1000)]


@serve.deployment(num_replicas=4, ray_actor_options={"num_cpus": 1})
class Ranker:
    def __init__(self):
        self.index = ray.get(load_shard.remote(os.getpid() % 97))

    def __call__(self, request) -> int:
        return len(self.index)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    print("READY deploying", flush=True)
    serve.start(proxy_location="Disabled")
    serve.run(Ranker.bind(), name="ranker", route_prefix=None)
    print("deployed", flush=True)


if __name__ == "__main__":
    main()
