"""Healthy: a Serve replica's constructor builds its search index for minutes; the client's first request waits.

Scenario: a Searcher deployment (1 replica) builds an in-memory vector index in `__init__`: ~3.5
minutes of silent numpy work (k-means style refinement over 20k random vectors), then serves
queries. The driver deploys it with `serve._run(..., _blocking=False)` (serve.run waits for RUNNING) and a SearchClient actor
immediately sends a query and waits in `.result()`: the request sits in the handle's router until a
replica is RUNNING. The replica actor is alive, its constructor CPU-busy in numpy, the application is
DEPLOYING, nothing is logged (Serve may note the replica is slow to start).

Mechanism (none: healthy): a Serve request waiting for a replica whose constructor is working.
Truth: no hang. A right diagnosis is no-hang or inconclusive (naming the constructor's work); a hang
naming the client, the replica or the router is a false hang.
"""
# redteam-ray-start: --resources='{"rt14_index":1}'
# redteam-settle: 25
import os
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Searcher:
    def __init__(self):
        import numpy as np

        rng = np.random.default_rng(7)
        vecs = rng.standard_normal((20_000, 64)).astype(np.float32)
        centroids = vecs[:256].copy()
        end = time.time() + 210
        rounds = 0
        while time.time() < end:
            assign = np.argmax(vecs @ centroids.T, axis=1)
            for c in range(0, 256, 32):
                members = vecs[assign == c]
                if len(members):
                    centroids[c] = members.mean(axis=0)
            rounds += 1
        self.centroids, self.rounds = centroids, rounds

    def __call__(self, q: int) -> int:
        return int(q) % 256 + self.rounds * 0


@ray.remote(num_cpus=0.1)
class SearchClient:
    def __init__(self):
        self.h = serve.get_deployment_handle("Searcher", app_name="search")

    def run(self, n: int) -> list[int]:
        return [self.h.remote(i).result() for i in range(n)]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve._run(Searcher.bind(), name="search", route_prefix=None, _blocking=False)
    client = SearchClient.remote()
    ref = client.run.remote(3)
    time.sleep(5)
    print("READY searching", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
