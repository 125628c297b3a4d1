"""Healthy: a driver drains an ActorPool whose actors each sit minutes in one eigen-decomposition.

Scenario: a spectral-clustering sweep. Two Spectra actors in a `ray.util.ActorPool`; the driver
calls `pool.map_unordered(lambda a, k: a.spectrum.remote(k), range(5))` and iterates it. Each call
builds a 7000x7000 symmetric affinity matrix and runs `np.linalg.eigh` once (single-threaded BLAS,
~1-2 min), then returns the top eigenvalues. Three calls wait in the pool's pending list on the
driver; nothing is logged until a call returns.
Mechanism (none: healthy): ActorPool with more work than actors; every actor in a long native call.
Truth: no hang. Right: no-hang or inconclusive; a hang on the driver's get_next or an actor is false.
"""
# redteam-ray-start: --resources='{"rt15c_sp":1}'
# redteam-settle: 25
import os

import ray
from ray.util import ActorPool


@ray.remote(num_cpus=1, runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}})
class Spectra:
    def spectrum(self, k: int):
        import numpy as np

        rng = np.random.default_rng(k)
        x = rng.standard_normal((7000, 64))
        a = x @ x.T
        w = np.linalg.eigh(a)[0]
        return k, [float(v) for v in w[-4:]]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    actors = [Spectra.remote() for _ in range(2)]
    ray.get([a.__ray_ready__.remote() for a in actors])
    pool = ActorPool(actors)
    print("READY sweeping", flush=True)
    for k, top in pool.map_unordered(lambda a, k: a.spectrum.remote(k), range(5)):
        print("k", k, top[-1], flush=True)


if __name__ == "__main__":
    main()
