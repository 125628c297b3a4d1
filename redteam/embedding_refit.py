"""Healthy: a Future.result(timeout=900) on a pool thread that runs one long numpy eigendecomposition loop.

# redteam-settle: 25
Scenario: EmbeddingRefit.refit() submits `_fit` to a 1-thread ThreadPoolExecutor and waits with
`fut.result(timeout=900)`. `_fit` runs `np.linalg.eigh` on 1200x1200 matrices in a list
comprehension (one line; LAPACK inside): its Python stack does not move for minutes, it prints
nothing, and the calling thread sits in a Condition wait.
Mechanism: a long native computation on another thread behind a timed future wait.
Truth: healthy (no culprit); refit returns after a few minutes. A hang verdict is wrong.
Driver in ray.get(refit).
"""
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import ray


def _fit(n_iter, dim):
    rng = np.random.default_rng(0)
    m = rng.standard_normal((dim, dim))
    m = m @ m.T
    vals = [np.linalg.eigh(m + k * np.eye(dim))[0][-1] for k in range(n_iter)]
    return float(sum(vals))


@ray.remote(num_cpus=1)
class EmbeddingRefit:
    def __init__(self):
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fit")

    def refit(self, n_iter):
        fut = self.pool.submit(_fit, n_iter, 1200)
        return fut.result(timeout=900)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    e = EmbeddingRefit.remote()
    ref = e.refit.remote(150)
    time.sleep(2)
    print("READY: driver -> EmbeddingRefit.refit (eigh loop on a pool thread)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
