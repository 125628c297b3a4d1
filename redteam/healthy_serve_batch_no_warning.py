"""Healthy: a Serve @batch deployment waits out its batch window (light traffic), with no warning from Serve in its log.

Scenario: as healthy_serve_batch_window, but the deployment admits more requests than a batch
(`max_ongoing_requests=16`, `@serve.batch(max_batch_size=8, batch_wait_timeout_s=90)`): Serve logs
no warning about the batch size, yet the client's 4 requests a round never fill a batch of 8, so
each batch waits the full 90 s window before it runs (in a few milliseconds). Between batches the
replica's loop is idle, the client waits in `.result()`, nothing is logged.

Mechanism (none: healthy): a timed batch window (a wait with a timeout) on a lightly loaded
deployment; nothing in the logs says so.
Truth: no hang. A right diagnosis says no-hang or inconclusive; serve-replica-stuck / a hang naming
the replica or the client is a false hang.
"""
# redteam-ray-start: --resources='{"rt8_batchnowarn":1}'
# redteam-settle: 25
import os

import ray
from ray import serve


@serve.deployment(num_replicas=1, max_ongoing_requests=16, ray_actor_options={"num_cpus": 0.1})
class Scorer:
    @serve.batch(max_batch_size=8, batch_wait_timeout_s=90)
    async def score(self, texts: list[str]) -> list[float]:
        return [len(t) / 100.0 for t in texts]

    async def __call__(self, text: str) -> float:
        return await self.score(text)


@ray.remote(num_cpus=0.1)
class EvalClient:
    def __init__(self):
        self.h = serve.get_deployment_handle("Scorer", app_name="scorer")

    def run(self, rounds: int) -> float:
        total = 0.0
        for r in range(rounds):
            resps = [self.h.remote(f"round {r} sample {i}") for i in range(4)]
            total += sum(x.result() for x in resps)
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve.run(Scorer.bind(), name="scorer", route_prefix=None)
    client = EvalClient.remote()
    ref = client.run.remote(3)
    print("READY scoring eval set", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
