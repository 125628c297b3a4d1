"""Healthy: an async embedding actor admits two requests at a time; the others await the semaphore while the two compute.

Scenario: Embedder (async actor) limits its work with `asyncio.Semaphore(2)`: each embed() call
does `async with self.slots:` then `await asyncio.to_thread(self._encode, n)`, minutes of numpy per
request in a worker thread. Six calls arrive: two hold the permits (their coroutines at the
to_thread await, two `asyncio_*` executor threads at ~100 % CPU between them), four await
`self.slots.acquire()`. Every permit is released when its holder's encode returns; each pair
finishes after ~3 min. No log line meanwhile.

Mechanism: an asyncio.Semaphore whose permits are held by live in-flight calls that compute in
executor threads and will release them.
Truth: healthy (no hang). A right answer is no-hang, or inconclusive naming the computing
executor threads; "hang" is a false hang.
"""
import asyncio
import os
import time

import ray


@ray.remote(num_cpus=1)
class Embedder:
    def __init__(self):
        self.slots = asyncio.Semaphore(2)

    def _encode(self, seconds):
        import numpy as np

        rng = np.random.default_rng(0)
        w = rng.standard_normal((256, 256)) / 16
        x = rng.standard_normal((64, 256))
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            x = np.tanh(x @ w)
        return float(x.sum())

    async def embed(self, i, seconds):
        async with self.slots:
            return i, await asyncio.to_thread(self._encode, seconds)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    emb = Embedder.remote()
    refs = [emb.embed.remote(i, 200) for i in range(6)]
    print("READY: driver -> Embedder.embed x6 (2 hold an asyncio.Semaphore and compute, 4 await it)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
