"""Healthy: a Serve deployment's sync handler computes for ~100 s per request; the client waits in .result().

Scenario: a Reranker deployment (max_ongoing_requests=1, one replica) reranks a large candidate
list per query with a silent numpy loop of ~100 s inside a plain `def __call__` (Serve runs it in
the replica's thread pool). An eval client actor sends 4 queries one after another and waits on
each DeploymentResponse. The replica's event loop is idle, one worker thread is CPU-busy, the client
sits in `.result()`, no request finishes for 100 s at a time, nothing is logged (~7 minutes).
Mechanism (none: healthy): Serve requests that take minutes each, computing in a replica thread.
Truth: no hang. A right diagnosis is no-hang or inconclusive; serve-replica-stuck /
serve-response-wait / a hang naming the replica or the client is a false hang.
"""
# redteam-ray-start: --resources='{"rt8_slowsync":1}'
# redteam-settle: 25
import os
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, max_ongoing_requests=1, ray_actor_options={"num_cpus": 0.1})
class Reranker:
    def __call__(self, query: str) -> float:
        import numpy as np

        rng = np.random.default_rng(len(query))
        cand = rng.standard_normal((256, 256))
        end = time.time() + 100.0
        rounds = 0
        while time.time() < end:
            cand = np.tanh(cand @ cand.T / 256.0)
            rounds += 1
        return float(cand.mean()) + rounds * 0.0


@ray.remote(num_cpus=0.1)
class EvalClient:
    def __init__(self):
        self.h = serve.get_deployment_handle("Reranker", app_name="rerank")

    def run(self, n: int) -> float:
        total = 0.0
        for i in range(n):
            total += self.h.remote(f"query {i}").result()
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve.run(Reranker.bind(), name="rerank", route_prefix=None)
    client = EvalClient.remote()
    ref = client.run.remote(4)
    print("READY reranking", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
