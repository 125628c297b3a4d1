"""Healthy: an async actor awaits asyncio.Queue.join() while its consumer scores each item in a thread for ~40 s.

Scenario: an async Reranker actor puts 8 candidate batches on an `asyncio.Queue` and awaits
`q.join()`. One consumer coroutine does `batch = await q.get()`, then
`await asyncio.to_thread(self._score, batch)` (a numpy loop of ~40 s per batch, GIL released in
BLAS most of the time), then `q.task_done()` in a `finally`. For ~5 minutes the event loop sits in
its selector, `flush` in `q.join()`, the consumer in `to_thread`; the only moving thread is the
default executor's worker. No log line until the end.

Mechanism (none: healthy): a queue join whose counter is decremented by a live consumer that is
waiting on a worker thread that computes.
Truth: no hang. A right answer is no-hang or inconclusive naming the executor thread's scoring;
hang (async-await-stuck on join) is a false hang.
"""
# redteam-settle: 25
import asyncio
import os
import time

import ray


@ray.remote(num_cpus=1)
class Reranker:
    def __init__(self):
        self.q = asyncio.Queue()
        self.scores = []
        self.consumer = None

    def _score(self, seed, seconds):
        import numpy as np

        rng = np.random.default_rng(seed)
        a = rng.standard_normal((200, 200))
        t0 = time.monotonic()
        acc = 0.0
        while time.monotonic() - t0 < seconds:
            a = np.tanh(a @ a.T / 200.0)
            acc += float(a[0, 0])
        return acc

    async def _consume(self, seconds):
        while True:
            seed = await self.q.get()
            try:
                self.scores.append(await asyncio.to_thread(self._score, seed, seconds))
            finally:
                self.q.task_done()

    async def rerank(self, n, seconds):
        if self.consumer is None:
            self.consumer = asyncio.get_running_loop().create_task(self._consume(seconds))
        for i in range(n):
            await self.q.put(i)
        await self.q.join()
        return len(self.scores)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    r = Reranker.remote()
    ray.get(r.__ray_ready__.remote())
    ref = r.rerank.remote(8, 40)
    print("READY: driver -> Reranker.rerank (q.join while the consumer scores in to_thread)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
