"""Workers meet at a barrier actor sized from the cluster's CPU count; the barrier's own CPU keeps the last worker from starting.

Scenario: a feature-sync job sizes its worker pool as `world = int(ray.cluster_resources()["CPU"])`
(4) and creates a SyncBarrier actor with num_cpus=1 (an async actor, `arrive` awaits an
asyncio.Event set when `world` ranks arrived) and then 4 ShardWorker actors with num_cpus=1. The
barrier takes one CPU, three workers start and wait in `ray.get(barrier.arrive.remote(rank))`; the
fourth stays PENDING_CREATION for a CPU held by the barrier and the three waiting workers. The
driver waits on all four `sync_step` calls.

Mechanism: a barrier whose last party is pending on resources held by the barrier and the parties
waiting at it (world size counted from capacity that the job itself consumes).
Truth: hang; culprit the world-size line `world = int(ray.cluster_resources()["CPU"])` with the
barrier's num_cpus=1 (the SyncBarrier holds the 4th worker's CPU); fix: SyncBarrier num_cpus=0
(it only counts) or world from what is free, or workers num_cpus<1.
"""
import asyncio
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=1)
class SyncBarrier:
    def __init__(self, world: int):
        self.world = world
        self.arrived: set = set()
        self.all_in = asyncio.Event()

    async def arrive(self, rank: int) -> int:
        self.arrived.add(rank)
        if len(self.arrived) >= self.world:
            self.all_in.set()
        await self.all_in.wait()
        return len(self.arrived)


@ray.remote(num_cpus=1)
class ShardWorker:
    def __init__(self, rank: int, barrier):
        self.rank, self.barrier = rank, barrier

    def sync_step(self) -> float:
        feats = np.random.default_rng(self.rank).standard_normal((512, 32))
        ray.get(self.barrier.arrive.remote(self.rank))
        return float(feats.mean())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    world = int(ray.cluster_resources()["CPU"])
    barrier = SyncBarrier.remote(world)
    workers = [ShardWorker.remote(r, barrier) for r in range(world)]
    refs = [w.sync_step.remote() for w in workers]
    time.sleep(8)
    print("READY workers syncing", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
