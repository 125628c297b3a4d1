"""Healthy: an async loader retries with exponential back-off (asyncio.sleep) until a slow build task publishes.

Scenario: IndexLoader (an async actor) serves lookups once the nightly index exists. `load()`
checks for the index's marker file and, while it is missing, backs off with `await
asyncio.sleep(delay)`, doubling `delay` up to 64 s; it logs only its first miss ("index not ready,
backing off"). The index is built by `build_index`, a Ray task doing ~3 minutes of silent numpy
work before it writes the marker. The driver waits in ray.get(loader.load()).
Mechanism: the async actor's loop thread is idle in select (the coroutine is suspended in a timer
await, invisible to py-spy); the loop has a timer due (epoll timeout set); the build task is
RUNNING and CPU-busy (numpy, its stack moving between calls).
Truth: healthy (no culprit): the build finishes, the next retry finds the marker, load() returns.
A hang verdict is wrong.
"""
import asyncio
import os
import tempfile
import time

import numpy as np
import ray

MARKER = os.path.join(tempfile.gettempdir(), f"rt14b_index_{os.getpid()}.ready")


@ray.remote(num_cpus=1)
def build_index(marker, rounds):
    rng = np.random.default_rng(0)
    acc = 0.0
    for _ in range(rounds):
        a = rng.standard_normal((500, 500))
        acc += float(np.linalg.norm(a @ a.T))
    with open(marker, "w") as fh:
        fh.write(f"{acc}\n")
    return acc


@ray.remote(num_cpus=0.1)
class IndexLoader:
    async def load(self, marker):
        delay, tries = 1.0, 0
        while not os.path.exists(marker):
            if tries == 0:
                print("index not ready, backing off", flush=True)
            tries += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 64.0)
        with open(marker) as fh:
            return {"tries": tries, "checksum": fh.read().strip()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    build = build_index.remote(MARKER, 12000)
    loader = IndexLoader.remote()
    ref = loader.load.remote(MARKER)
    time.sleep(3)
    print("READY: driver -> IndexLoader.load (asyncio.sleep back-off while build_index computes)", flush=True)
    print(ray.get(ref), ray.get(build))


if __name__ == "__main__":
    main()
