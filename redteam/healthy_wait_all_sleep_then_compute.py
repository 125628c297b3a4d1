"""Healthy: the driver waits in ray.wait(num_returns=len(refs)) on tasks that sleep, then compute.

Scenario: an evaluation sweep submits 2 `evaluate` tasks. Each waits 90 s for its "simulator slot"
(`time.sleep(90)`, a fixed warm-up of an external simulator), then computes ~60 s of silent numpy.
The driver collects them with `ray.wait(refs, num_returns=len(refs))` (no timeout).
Mechanism: the driver is idle in `ray.wait` for minutes; every task is RUNNING; first idle in a
plain sleep, then busy in numpy with a static stack; nothing is logged.
Truth: healthy (no culprit): both tasks finish after ~2.5 minutes and ray.wait returns.
A hang verdict is wrong.
"""
# redteam-settle: 25
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=1)
def evaluate(i: int) -> float:
    time.sleep(90)
    rng = np.random.default_rng(i)
    m = rng.standard_normal((400, 400))
    t0 = time.time()
    while time.time() - t0 < 60:
        m = np.tanh(m @ m.T / 400.0)
    return float(m.sum())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    refs = [evaluate.remote(i) for i in range(2)]
    print("READY: driver in ray.wait(num_returns=2) on evaluate tasks (sleep 90 s, then compute)", flush=True)
    ready, _ = ray.wait(refs, num_returns=len(refs))
    print(ray.get(ready))


if __name__ == "__main__":
    main()
