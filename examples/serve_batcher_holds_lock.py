"""Rollout actors call a Serve deployment whose own batcher holds the lock every request needs.

Scenario
    RL rollouts: four ``RolloutWorker`` actors score their samples with a reward model served by
    Ray Serve. Each calls the ``RewardModel`` deployment through a ``DeploymentHandle``
    (``handle.score.remote(sample).result()``). The deployment batches requests by hand: an
    ``asyncio.Lock`` guards the pending batch; ``score`` appends its sample under the lock and
    sets an ``asyncio.Event`` when the batch is full; a background batcher task takes the lock,
    waits for the event, and scores the whole batch.

Mechanism
    The batcher awaits the event *while holding the lock* (``async with self.lock: await
    self.full.wait()``). Every ``score`` call awaits that same lock before it can append and set
    the event: nothing can ever set it. Every request stays in flight on the replica; the rollout
    actors wait in ``DeploymentResponse.result``; the driver waits in ``ray.get`` on them.

What misleads
    The replica's stack shows nothing: its coroutines are suspended in ``await``, which py-spy
    cannot see (the user-code event loop thread is idle in the selector). Serve requests have no
    task rows in the State API, so nothing in the task table links the rollout actors to the
    replica; the rollout actors look like the end of the chain (or like each other's victims).
    The Serve controller's periodic calls finish all the time and are no progress of the job.

Expected diagnosis
    The rollout actors wait in ``DeploymentResponse.result`` on the ``RewardModel`` deployment:
    the edge goes to its replica actor (``ServeReplica:rewards:RewardModel``), found from the
    Serve controller's state (dashboard ``/api/serve/applications/``). The replica is the
    culprit: its requests are in flight (``ray_serve_replica_processing_queries``) and its
    request log has stopped; the evidence says its coroutines await (invisible to py-spy).
"""

import asyncio
import os

import ray
from ray import serve

EXPECTED = {
    "verdict": "hang",
    "pattern": "serve-replica-stuck",
    "culprits": [{"class_name": "ServeReplica:rewards:RewardModel", "rank": None}],
    "ready": "READY",
    "ready_timeout_s": 300,
    "notes": "the replica's batcher awaits an asyncio.Event while holding the asyncio.Lock that "
    "score() needs before it can set the event; the rollout actors wait in DeploymentResponse.result.",
}

BATCH = 8


@serve.deployment(num_replicas=1, max_ongoing_requests=64, ray_actor_options={"num_cpus": 0.1})
class RewardModel:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.full = asyncio.Event()
        self.pending: list = []
        self.scores: dict = {}
        self.batcher = asyncio.get_event_loop().create_task(self._batch_forever())

    async def _batch_forever(self):
        while True:
            async with self.lock:
                await self.full.wait()  # BUG: waits for the batch while holding the lock score() needs
                batch, self.pending = self.pending, []
                self.full.clear()
            for key, sample in batch:
                self.scores[key].set_result(float(len(sample)))

    async def score(self, sample: str) -> float:
        future = asyncio.get_running_loop().create_future()
        async with self.lock:
            self.scores[id(future)] = future
            self.pending.append((id(future), sample))
            if len(self.pending) >= BATCH:
                self.full.set()
        return await future

    def ping(self) -> str:
        return "ok"


@ray.remote(num_cpus=0.1)
class RolloutWorker:
    def __init__(self, handle):
        self.reward = handle

    def warm(self) -> str:
        return self.reward.ping.remote().result()  # the handle's router is set up; ping needs no lock

    def rollout(self, n: int) -> float:
        total = 0.0
        for i in range(n):
            total += self.reward.score.remote(f"sample-{i}").result()
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")  # no HTTP proxy: handles only (a proxy would bind every interface)
    handle = serve.run(RewardModel.bind(), name="rewards", route_prefix=None)
    assert handle.ping.remote().result() == "ok"  # the replica answers a call that needs no lock
    workers = [RolloutWorker.remote(handle) for _ in range(4)]
    ray.get([w.warm.remote() for w in workers])
    refs = [w.rollout.remote(16) for w in workers]
    print("READY: rollouts scoring through the RewardModel deployment", flush=True)
    print(ray.get(refs), flush=True)  # hangs: the batcher holds the lock every score() needs


if __name__ == "__main__":
    main()
