"""Healthy: one actor step is a ~20 s numpy computation (busy in C, static stack), then progress.

Mechanism: Solver.step runs repeated matmuls for ~20 s (one Python frame, CPU busy), prints
'step N done', 6 steps in total. Truth: no hang (busy, making progress inside native code).
"""
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=0.1)
class Solver:
    def step(self, i):
        a = np.random.default_rng(i).standard_normal((400, 400))
        end = time.time() + 20
        acc = 0.0
        while time.time() < end:
            acc += float(np.linalg.svd(a, compute_uv=False)[0])
        return acc

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    s = Solver.remote()
    print("READY: 6 steps of 20s numpy", flush=True)
    for i in range(6):
        ray.get(s.step.remote(i))
        print(f"step {i} done", flush=True)

if __name__ == "__main__":
    main()
