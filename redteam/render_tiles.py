"""Driver gathers large rendered tiles from slow tasks with one ray.get (healthy, finishes).

Scenario: a map renderer submits 6 tile tasks (num_cpus=1 each on a 4-CPU cluster, so two
waves); each renders a 2048x2048 float64 tile (32 MB) by iterating a fractal for ~70-120 s,
then returns it. The driver does a single `tiles = ray.get(refs)` and prints nothing until all
are back (~4 min on this machine).

Mechanism: none -- a large ray.get of slow producers that do finish. The tasks are at 100 %
CPU with a moving stack (the iteration loop); 2 tasks are PENDING_NODE_ASSIGNMENT behind the
first 4 (waiting for CPUs that the running tasks will free); no task finishes in a short window.
Truth: NOT hung. Expected no-hang or inconclusive, never hang (and not resource-starvation: the
CPU holders are running tasks that end).
"""
# redteam-settle: 25
import os

import ray


@ray.remote(num_cpus=1)
def render_tile(tx: int, ty: int, size: int, iters: int):
    import numpy as np
    xs = np.linspace(-2.0 + tx * 0.5, -1.5 + tx * 0.5, size)
    ys = np.linspace(-1.0 + ty * 0.5, -0.5 + ty * 0.5, size)
    c = xs[None, :] + 1j * ys[:, None]
    z = np.zeros_like(c)
    escape = np.zeros(c.shape, dtype=np.float64)
    for k in range(iters):
        z = z * z + c
        escape[np.abs(z) > 2] = k
        z[np.abs(z) > 2] = 2
    return escape


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    refs = [render_tile.remote(tx, ty, 2048, 200) for tx in range(3) for ty in range(2)]
    print("READY rendering 6 tiles", flush=True)
    tiles = ray.get(refs)
    print("rendered", sum(float(t.mean()) for t in tiles))


if __name__ == "__main__":
    main()
