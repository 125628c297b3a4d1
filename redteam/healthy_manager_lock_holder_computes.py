"""Healthy: a child waits on a multiprocessing.Manager lock that its sibling holds through minutes of numpy work.

Scenario: a ShardMerger actor starts a `multiprocessing.Manager()` (a server process on a unix
socket) and shares one `mgr.Lock()` between two forked workers that append to the same output
file. Worker 0 takes the lock and merges its shard under it (~5 minutes of matrix products, its
`block` counter advancing); worker 1 waits in `lock.acquire()` (a proxy call served by the
manager's handler thread, itself blocked in the real lock's acquire). The actor joins both.

Mechanism (none: healthy): a served lock held by a live client (its connection open, its handler
idle at recv) that computes and will release it.
Truth: no hang. A right diagnosis is no-hang or inconclusive; native-wait-holder-died or any hang
naming the manager or worker 1 is a false hang.
"""
# redteam-settle: 25
import multiprocessing as mp
import os
import time

import numpy as np
import ray


def merge_shard(lock, index: int, blocks: int) -> None:
    if index == 1:
        time.sleep(2)  # let worker 0 take the lock first
    with lock:
        a = np.random.default_rng(index).standard_normal((300, 300))
        total = 0.0
        for block in range(blocks):
            total += float((a @ a.T)[0, 0]) / (block + 1)


@ray.remote(num_cpus=1)
class ShardMerger:
    def merge(self, blocks: int) -> int:
        ctx = mp.get_context("fork")
        with ctx.Manager() as mgr:
            lock = mgr.Lock()
            workers = [ctx.Process(target=merge_shard, args=(lock, i, blocks), name=f"merge-{i}") for i in range(2)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            return sum(w.exitcode or 0 for w in workers)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    merger = ShardMerger.remote()
    ref = merger.merge.remote(200_000)
    print("READY merging", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
