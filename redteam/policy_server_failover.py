"""An RL job's policy server crashes and restarts (max_restarts); the job's own warm standby took the accelerator the restart needs.

Scenario: the cluster has one unit of custom resource `rt15_accel` (one inference accelerator).
PolicyServer (resources={"rt15_accel": 1}, max_restarts=2, max_task_retries=-1) serves weights to
two Collector actors, which call `ray.get(self.server.weights.remote())` in their rollout loop. A
"failover" helper copied from a non-Ray service creates a warm standby PolicyServer (same options)
up front: it stays PENDING_CREATION while the primary holds the accelerator. The primary then
crashes (os._exit in `reload`, as an OOM would). The standby's lease request was already queued at
the raylet, so it gets the accelerator the crash freed; Ray's restart of the primary (RESTARTING)
now waits for `rt15_accel` forever. The collectors' calls to the primary are queued for the restart
(max_task_retries=-1), the driver waits on the collectors. The standby is idle: nobody calls it
(the helper only "switches over" on an error that max_task_retries never raises).

Mechanism: an actor's restart (max_restarts) pending on a resource held by another, idle actor of
the job created while the first was alive (its replacement).
Truth: hang; culprit the standby PolicyServer (holds the only rt15_accel, idle; created by
`standby = PolicyServer.options(name="policy-standby").remote(1)` in main); the restarting primary,
the collectors and the driver are victims. Fix: do not create a standby when Ray restarts the actor
(max_restarts does the failover), or give the cluster a second accelerator / the standby none.
"""
# redteam-ray-start: --resources='{"rt15_accel":1}'
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=0.25, resources={"rt15_accel": 1}, max_restarts=2, max_task_retries=-1)
class PolicyServer:
    def __init__(self, generation: int):
        self.generation = generation
        self.w = np.random.default_rng(generation).standard_normal(4096)

    def weights(self) -> np.ndarray:
        return self.w

    def reload(self, path: str) -> None:
        # the new checkpoint does not fit: the process is killed (as by the OOM killer)
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


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    server = PolicyServer.options(name="policy-primary").remote(0)
    ray.get(server.weights.remote())
    standby = PolicyServer.options(name="policy-standby").remote(1)  # "warm standby" for failover
    collectors = [Collector.remote(server) for _ in range(2)]
    refs = [c.rollout.remote(100_000) for c in collectors]
    time.sleep(4)
    server.reload.remote("/ckpt/policy-big.pt")
    time.sleep(8)
    print("READY collectors waiting on the restarting policy server", flush=True)
    try:
        print(ray.get(refs))
    except ray.exceptions.RayActorError:
        ray.get(standby.weights.remote())


if __name__ == "__main__":
    main()
