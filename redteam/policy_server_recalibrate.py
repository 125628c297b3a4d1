"""Healthy: a crashed policy server's restart waits for the accelerator a calibration task holds while it computes; it finishes.

Scenario: the cluster has one unit of `rt15_accel`. PolicyServer (resources={"rt15_accel": 1},
max_restarts=2, max_task_retries=-1) serves weights to two Collector actors. The driver also
submits `calibrate` (resources={"rt15_accel": 1}), a ~3.5 min numpy sweep: it stays pending while
the server holds the accelerator. The server crashes (os._exit in `reload`); the queued calibrate
task takes the freed accelerator and computes; the server's restart (RESTARTING) waits for it.
The collectors' calls are queued for the restart. When calibrate returns (~3.5 min), the
accelerator is free, the server restarts and the collectors go on.

Mechanism (none: healthy): an actor restart pending on a resource held by a running, CPU-busy task
that ends by itself.
Truth: no hang. A right diagnosis says no-hang or inconclusive (names calibrate computing); a hang
is a false hang.
"""
# redteam-ray-start: --resources='{"rt15_accel":1}'
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=0.25, resources={"rt15_accel": 1}, max_restarts=2, max_task_retries=-1)
class PolicyServer:
    def __init__(self, generation: int):
        self.w = np.random.default_rng(generation).standard_normal(4096)

    def weights(self) -> np.ndarray:
        return self.w

    def reload(self, path: str) -> None:
        os._exit(137)


@ray.remote(num_cpus=0.25)
class Collector:
    def __init__(self, server):
        self.server = server

    def rollout(self, steps: int) -> float:
        total = 0.0
        for _ in range(steps):
            w = ray.get(self.server.weights.remote())
            total += float(np.tanh(w[:64]).sum())
            time.sleep(0.2)
        return total


@ray.remote(num_cpus=1, resources={"rt15_accel": 1})
def calibrate(seconds: float) -> float:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 300))
    end = time.time() + seconds
    acc = 0.0
    while time.time() < end:
        a = np.tanh(a @ a.T / 300.0)
        acc += float(a[0, 0])
    return acc


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    server = PolicyServer.remote(0)
    ray.get(server.weights.remote())
    cal = calibrate.remote(210)
    collectors = [Collector.remote(server) for _ in range(2)]
    refs = [c.rollout.remote(2000) for c in collectors]
    time.sleep(4)
    server.reload.remote("/ckpt/policy-big.pt")
    time.sleep(8)
    print("READY collectors waiting on the restarting policy server", flush=True)
    print(ray.get(cal), ray.get(refs))


if __name__ == "__main__":
    main()
