"""A healthy solver whose every step is one long numpy computation: busy, same line, no output.

Scenario
    A ``Solver`` actor refines a spectral estimate: each ``step`` runs SVDs of a 300x300 matrix
    for about 12 s of CPU and returns one number; the driver runs 5 steps and prints
    ``step N done`` after each. The job ends successfully after about a minute.

Mechanism
    Nothing is wrong. During a step the actor's main thread is active in numpy (``svd``) under
    the same job line in every sample, it burns a core, writes nothing and logs nothing; no task
    finishes for 12 s. But an earlier ``Solver.step`` finished after about 12 s, and the running
    one has run for only a few seconds.

What misleads
    Two samples a second apart show the same line spinning at full CPU: the stack of a busy loop
    that never ends, so it reads as ``busy-loop``. Wrong to call it a hang: the same call has
    finished before after a longer time than this one has run.

Expected diagnosis
    ``inconclusive``: Solver is busy in ``Solver.step``, which has run less time than an earlier
    ``Solver.step`` took to finish: a long computation this young is no hang yet. Never ``hang``.
"""

import os
import time

import numpy as np
import ray

EXPECTED = {
    "verdict": "inconclusive",
    "pattern": None,
    "culprits": [],
    "notes": "healthy: Solver.step is ~12 s of numpy SVDs (busy, one job line, no output), 5 steps; "
    "diagnosed a few seconds into step 1, after step 0 finished in ~12 s.",
}

STEP_S = 12.0
STEPS = 5


@ray.remote(num_cpus=0.1)
class Solver:
    def step(self, i: int) -> float:
        a = np.random.default_rng(i).standard_normal((300, 300))
        end = time.monotonic() + STEP_S
        top = 0.0
        while time.monotonic() < end:
            top = max(top, float(np.linalg.svd(a, compute_uv=False)[0]))
        return top


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    solver = Solver.remote()
    for i in range(STEPS):
        ref = solver.step.remote(i)
        if i == 1:
            print("READY: step 0 finished; step 1 is a 12 s numpy computation", flush=True)
        print(f"step {i} done: {ray.get(ref):.3f}", flush=True)


if __name__ == "__main__":
    main()
