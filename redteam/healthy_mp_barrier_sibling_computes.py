"""Healthy: forked shard workers wait at a multiprocessing.Barrier while their last sibling is still computing.

Scenario: a ShardStats actor forks three worker processes (start method "fork") that meet at a
`multiprocessing.Barrier(3)` before the merge phase. Workers 0 and 1 have small shards and reach
the barrier in a second; worker 2 has the big shard and computes numpy statistics for minutes
before arriving. Workers 0 and 1 sit in the barrier's Condition wait (a POSIX semaphore wait,
sem_timedwait/futex); the actor's thread in `proc.join()`. Nothing is logged meanwhile.

Mechanism: a barrier whose missing party is alive and computing, and will arrive.
Truth: healthy (no hang). A right answer is no-hang, or inconclusive naming worker 2's
computation; "hang" is a false hang.
"""
import multiprocessing as mp
import os
import time

import ray


def _work(idx, barrier, seconds):
    import numpy as np

    rng = np.random.default_rng(idx)
    t0 = time.monotonic()
    acc = 0.0
    while time.monotonic() - t0 < seconds:
        a = rng.standard_normal((300, 300))
        acc += float(np.linalg.svd(a, compute_uv=False)[0])
    print(f"worker {idx} ({os.getpid()}): shard done after {time.monotonic() - t0:.0f}s, at the barrier", flush=True)
    barrier.wait()
    print(f"worker {idx}: merged", flush=True)


@ray.remote(num_cpus=1)
class ShardStats:
    def run(self):
        ctx = mp.get_context("fork")
        barrier = ctx.Barrier(3)
        procs = [ctx.Process(target=_work, args=(i, barrier, s)) for i, s in enumerate((1, 1, 420))]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        return [p.exitcode for p in procs]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    st = ShardStats.remote()
    ref = st.run.remote()
    print("READY: driver -> ShardStats.run (two workers at an mp.Barrier, the third computes ~7 min)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
