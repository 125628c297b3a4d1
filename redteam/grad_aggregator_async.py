"""Async gradient aggregator whose every concurrency slot awaits a round that queued pushes complete.

Scenario: 6 data-parallel worker tasks push their gradient shard to an async GradientAggregator
(max_concurrency=4) each step and wait for the averaged result. push() adds the shard, then
awaits (via _wait_round) an asyncio.Condition until all 6 shards of the round are in. The first
4 pushes fill every concurrency slot and wait; pushes 5 and 6 are queued in Ray's actor-task
queue (never started), so the round never completes. The workers wait in ray.get, the driver on
the workers.

Mechanism: an async actor with every max_concurrency slot awaiting a condition that only a
later, queued call of the same actor can satisfy (the queued push calls are in the State API,
not yet running; the awaiting coroutines are invisible to py-spy: the loop thread shows only
the selector).
Truth: culprit GradientAggregator (max_concurrency 4 < 6 participants in its barrier).
Fix: max_concurrency >= number of workers, or a non-blocking push + separate fetch.
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class GradientAggregator:
    def __init__(self, world: int):
        self.world = world
        self.shards: dict[int, list[float]] = {}
        self.round = 0
        self.cv = asyncio.Condition()

    async def _wait_round(self, r: int) -> None:
        async with self.cv:
            await self.cv.wait_for(lambda: self.round > r)

    async def push(self, rank: int, grad: list[float]) -> list[float]:
        r = self.round
        async with self.cv:
            self.shards[rank] = grad
            if len(self.shards) == self.world:
                self.mean = [sum(g[i] for g in self.shards.values()) / self.world for i in range(len(grad))]
                self.shards.clear()
                self.round += 1
                self.cv.notify_all()
        await self._wait_round(r)
        return self.mean


@ray.remote(num_cpus=0.1)
def dp_worker(agg, rank: int, steps: int) -> float:
    w = [0.0] * 8
    for step in range(steps):
        grad = [(rank + 1) * 0.01 * (i + step) for i in range(8)]
        mean = ray.get(agg.push.remote(rank, grad))
        w = [a - 0.1 * b for a, b in zip(w, mean, strict=True)]
    return sum(w)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    agg = GradientAggregator.remote(6)
    refs = [dp_worker.remote(agg, r, 20) for r in range(6)]
    print("READY 6 workers pushing gradients", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
