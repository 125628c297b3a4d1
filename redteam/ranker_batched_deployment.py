"""Serve ranking deployment whose @serve.batch handler awaits a model its loader task failed to load.

Scenario: a Ranker deployment scores candidate lists with @serve.batch (max_batch_size 8). Its
__init__ starts the model load as an asyncio task (self._loader = asyncio.create_task(...)) "so
the replica becomes healthy fast"; the batch handler awaits self._model_ready before scoring.
The load raises (the checkpoint path is wrong); the exception is stored in the task, never
retrieved or logged (the task is still referenced), so _model_ready is never set. Every batch
awaits forever; the replica stays HEALTHY (its health check does not look at the model). Two
Evaluator tasks call the deployment through a DeploymentHandle and wait in .result().

Mechanism: a Serve replica's batcher awaiting an asyncio.Event whose setter (an asyncio task of
the same replica) has finished with an exception. Invisible to py-spy (idle loop); visible in
Serve's metrics (requests in flight, none finishing) and the replica's request log (no request
completes).
Truth: culprit the Ranker replica (model-loader task failed; _model_ready never set); the
Evaluator tasks and the driver are victims. Fix: load the model synchronously in __init__ (or
re-raise the loader's exception in the handler / health check), await with a timeout.
"""
# redteam-ray-start: --resources='{"serve_rank":1}'
import asyncio
import os

import ray
from ray import serve


@serve.deployment(num_replicas=1, max_ongoing_requests=32, ray_actor_options={"num_cpus": 0.1})
class Ranker:
    def __init__(self, checkpoint: str):
        self._model_ready = asyncio.Event()
        self.weights: list[float] | None = None
        self._loader = asyncio.get_event_loop().create_task(self._load(checkpoint))

    async def _load(self, checkpoint: str) -> None:
        await asyncio.sleep(0.5)
        with open(checkpoint) as fh:
            self.weights = [float(x) for x in fh.read().split()]
        self._model_ready.set()

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.05)
    async def score(self, candidates: list[list[float]]) -> list[float]:
        await self._model_ready.wait()
        assert self.weights is not None
        return [sum(w * c for w, c in zip(self.weights, cand, strict=False)) for cand in candidates]

    async def __call__(self, candidate: list[float]) -> float:
        return await self.score(candidate)


@ray.remote(num_cpus=0.1)
def evaluate(queries: int) -> float:
    handle = serve.get_deployment_handle("Ranker", app_name="ranker")
    responses = [handle.remote([0.1 * q, 0.2, 0.3]) for q in range(queries)]
    return sum(r.result() for r in responses)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve.run(Ranker.bind("/models/ranker/v7/weights.txt"), name="ranker", route_prefix=None)
    refs = [evaluate.remote(20) for _ in range(2)]
    print("READY 2 evaluators querying the ranker", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
