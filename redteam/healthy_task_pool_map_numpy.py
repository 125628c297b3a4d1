"""Healthy: a Ray task waits in multiprocessing.Pool.map while its pool workers compute silently in numpy.

Scenario: `featurize_partition` (a Ray task) splits its partition into chunks and maps them over a
`multiprocessing.Pool(2)` (fork) of its own; each chunk is one `np.linalg.svdvals` of a 2600x2600 matrix (a single LAPACK call,
~30-60 s here), silent; 6 chunks.
Mechanism: the task's main thread is idle in `Pool.map` → `ApplyResult.wait` (a Condition/Event
wait) for minutes; the Pool's helper threads are idle too; the work happens in two forked child
processes (not Ray workers, no task rows) whose Python stacks stay at one numpy line.
Truth: healthy (no culprit): the 6 chunks finish after ~2-4 minutes and map returns.
A hang verdict is wrong (the working processes are the pool's children).
"""
# redteam-settle: 25
import multiprocessing as mp
import os

import numpy as np
import ray


@ray.remote(num_cpus=1)
def featurize_partition(part: int) -> list:
    rng = np.random.default_rng(part)
    chunks = [rng.standard_normal((2600, 2600)) for _ in range(6)]
    with mp.get_context("fork").Pool(2) as pool:
        # np.linalg.svdvals pickles by reference (a job script's own functions would not, in a Ray worker)
        return [float(s[0]) for s in pool.map(np.linalg.svdvals, chunks)]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = featurize_partition.remote(0)
    print("READY: driver -> featurize_partition (Pool.map on 2 forked numpy workers)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
