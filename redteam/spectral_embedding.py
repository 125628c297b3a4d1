"""Spectral embedding of a similarity graph: each round is one multi-second LAPACK call.

Scenario: a clustering task builds a 2600x2600 affinity matrix per round and calls
numpy.linalg.eigh on it (one native call of several seconds on this machine, GIL released, one
Python stack the whole time), then an argsort of a 20M-element array (another long native
call). 20 rounds, no output until the end. The driver waits in ray.get on the task.

Mechanism: none -- healthy long C-level calls: the stack stays on the same line for seconds at a
time, the process is at ~100 % CPU (a single BLAS thread), nothing is logged or finished.
Truth: NOT hung (finishes after several minutes). Expected no-hang or inconclusive, never hang.
"""
# redteam-settle: 25
import os

import ray


@ray.remote(num_cpus=1, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}})
def spectral_rounds(rounds: int, n: int) -> list[float]:
    import numpy as np
    rng = np.random.default_rng(0)
    gaps = []
    for _round in range(rounds):
        pts = rng.standard_normal((n, 16))
        sq = (pts ** 2).sum(1)
        affinity = np.exp(-(sq[:, None] + sq[None, :] - 2 * pts @ pts.T) / 16.0)
        laplacian = np.diag(affinity.sum(1)) - affinity
        vals = np.linalg.eigh(laplacian)[0]
        order = np.argsort(rng.standard_normal(20_000_000), kind="stable")
        gaps.append(float(vals[1] - vals[0]) + float(order[0]) * 0)
    return gaps


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = spectral_rounds.remote(20, 2600)
    print("READY spectral embedding started", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
