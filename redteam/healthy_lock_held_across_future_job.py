"""Healthy: a method holds its actor's lock while it waits on a pool Future whose job never takes that lock.

Scenario: ModelCache (threaded, max_concurrency=2) refreshes a model under `self._mu`: inside
`with self._mu:` it submits `quantize(weights)` to its ThreadPoolExecutor(1) and waits in
`fut.result()`. `quantize` is ~3 minutes of pure-Python work on its argument only (it never
touches `self._mu` or the actor). Meanwhile the driver asks `stats()`, which waits at
`with self._mu:` for the refresh to finish. The driver waits on both.
Mechanism: the twin of lock_held_across_future_wait: a lock held across a Future wait, a second
thread waiting for that lock -- but the pool's worker runs Python bytecode that does not need the
lock (its line and locals move between samples); it will finish and release everything.
Truth: healthy (no culprit): quantize returns, refresh releases the lock, stats returns.
A hang verdict is wrong.
"""
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ray


def quantize(weights, levels):
    out = []
    scale = max(abs(w) for w in weights) or 1.0
    for rep in range(levels):
        acc = 0
        for w in weights:
            q = int(round(w / scale * 127))
            acc = (acc * 131 + q + rep) & 0xFFFFFFFF
        out.append(acc)
    return out


@ray.remote(num_cpus=1, max_concurrency=2)
class ModelCache:
    def __init__(self):
        self._mu = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quant")
        self.version = 0
        self.codes = []

    def refresh(self, n_weights, levels):
        with self._mu:
            weights = [((i * 7919) % 1000 - 500) / 250.0 for i in range(n_weights)]
            fut = self._pool.submit(quantize, weights, levels)
            self.codes = fut.result()
            self.version += 1
            return self.version

    def stats(self):
        with self._mu:
            return {"version": self.version, "codes": len(self.codes)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cache = ModelCache.remote()
    r = cache.refresh.remote(200_000, 6000)
    time.sleep(2)
    s = cache.stats.remote()
    print("READY: driver -> ModelCache.refresh (lock held over a long pool job) + stats (waits for the lock)", flush=True)
    print(ray.get(r), ray.get(s))


if __name__ == "__main__":
    main()
