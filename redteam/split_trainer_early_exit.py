"""streaming_split: one trainer stops pulling its shard early, the other blocks in its iterator.

Scenario: two TrainWorker actors consume ds.streaming_split(2, equal=True). Worker 1 is
configured with max_steps=5 (a copy-paste from a smoke-test config) and leaves its loop early,
then waits at the end-of-epoch rendezvous (an EpochBarrier actor, wait() until both arrived).
Worker 0 keeps iterating; once the split coordinator has buffered what worker 1 does not take
(blocks of 100 images, ~5 MB each; the object store is 300 MB), the streaming executor stops
(back-pressure) and worker 0 waits in its split iterator forever;
it never reaches the barrier. The driver waits on both workers.

Mechanism: a streaming_split consumer that stopped pulling: the other consumer waits inside
Ray Data (SplitCoordinator.get on the coordinator actor), the stopped one waits on an actor
barrier that needs the blocked one.
Truth: culprit TrainWorker 1 (left its shard early: max_steps=5; it must drain its iterator or
all workers must use the same step count); worker 0 and the barrier are victims. The decisive
evidence: worker 1 is not in a Ray Data frame (it is in ray.get on EpochBarrier.wait) while
worker 0 is in the split iterator.
"""
# redteam-settle: 30
# redteam-ray-start: --object-store-memory=300000000 --resources='{"rt_split":1}'
import asyncio
import os

import numpy as np
import ray


@ray.remote(num_cpus=0)
class EpochBarrier:
    def __init__(self, parties: int):
        self.parties, self.arrived = parties, 0
        self.done = asyncio.Event()

    async def wait(self, rank: int) -> int:
        self.arrived += 1
        if self.arrived == self.parties:
            self.done.set()
        await self.done.wait()
        return self.arrived


@ray.remote(num_cpus=0.1)
class TrainWorker:
    def __init__(self, rank: int, max_steps: int | None):
        self.rank, self.max_steps = rank, max_steps

    def train_epoch(self, shard, barrier) -> int:
        steps = 0
        for _batch in shard.iter_batches(batch_size=32):
            steps += 1
            if self.max_steps is not None and steps >= self.max_steps:
                print(f"READY rank {self.rank}: epoch done after {steps} steps", flush=True)
                break
        ray.get(barrier.wait.remote(self.rank))
        return steps


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(40_000, override_num_blocks=400).map_batches(
        lambda b: {"id": b["id"], "pixels": np.ones((len(b["id"]), 64, 64, 3), dtype=np.float32)})
    splits = ds.streaming_split(2, equal=True)
    barrier = EpochBarrier.remote(2)
    workers = [TrainWorker.remote(0, None), TrainWorker.remote(1, 5)]
    refs = [w.train_epoch.remote(s, barrier) for w, s in zip(workers, splits, strict=True)]
    print("epoch started on 2 workers", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
