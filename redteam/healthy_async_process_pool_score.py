"""Healthy: an async actor awaits a ProcessPoolExecutor job that computes for a few minutes.

Scenario: Scorer.score (async actor) offloads a pure-Python scoring pass to a
`concurrent.futures.ProcessPoolExecutor(max_workers=1)` with `await loop.run_in_executor(pool, ...)`.
The pass counts primes in growing ranges for ~6 minutes of wall time and then returns. The actor's
loop is idle in the await, the executor's management thread waits on its result queue, the driver
waits in ray.get — but the pool's child process burns a CPU the whole time and finishes.

Mechanism: none (long CPU work in a process-pool child, which is not a Ray worker).
Truth: no hang (the pool child, a fork of the actor, is busy in count_primes;
it returns after ~360 s). A right diagnosis is no-hang or inconclusive naming the busy child.
count_primes lives in _rt9_primes.py so that the pool can pickle it (a first run with it in
the script failed: PicklingError; output rt_healthy_async_process_pool_score.v1_pickle_failed).
"""
import asyncio
import concurrent.futures
import os

import ray
from _rt9_primes import count_primes


@ray.remote(num_cpus=1)
class Scorer:
    def __init__(self):
        self.pool = concurrent.futures.ProcessPoolExecutor(max_workers=1)

    async def score(self, seconds):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, count_primes, seconds)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    s = Scorer.remote()
    ref = s.score.remote(360)
    print("READY: driver -> Scorer.score awaits a process-pool child computing for ~6 min", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
