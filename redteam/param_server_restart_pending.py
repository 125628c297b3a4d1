"""A restarted parameter server stays pending: collectors queued for CPUs took the ones it freed.

Scenario: an RL job creates ParameterServer (num_cpus=2, max_restarts=3), then asks for its
"desired" 4 RolloutCollector actors (1 CPU each) on a 4-CPU cluster: 2 start, 2 stay pending,
"they will start when the autoscaler adds a node". The parameter server's process dies after 5
updates (a native crash; here os._exit). Ray restarts it, but the two pending collectors were
queued for CPUs first and take the 2 CPUs it freed. The server stays RESTARTING (its creation
pending on {CPU: 2}); the driver's next apply_update is queued on it and ray.get waits forever
(after one logged "parameter server error, retrying").

Mechanism: an actor being restarted whose resources are held by actors that were pending before
its death (now ALIVE and idle); 4/4 CPUs held by collectors, demand {CPU: 2} for the restart.
Truth: culprit the RolloutCollector actors holding the CPUs (the two that started after the
crash in particular); the root event is the server's crash. Fix: reserve the server's resources
(a placement group), or give idle collectors fewer CPUs / do not over-request actors.
"""
import os
import time

import ray


@ray.remote(num_cpus=2, max_restarts=3)
class ParameterServer:
    def __init__(self):
        self.version = 0

    def apply_update(self, grad: float) -> int:
        self.version += 1
        if self.version == 5:
            os._exit(1)  # stands in for a native crash (NCCL abort, segfault)
        return self.version


@ray.remote(num_cpus=1)
class RolloutCollector:
    def ping(self) -> int:
        return 1


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ps = ParameterServer.remote()
    ray.get(ps.apply_update.remote(0.0))
    collectors = [RolloutCollector.remote() for _ in range(4)]
    ready, pending = ray.wait([c.ping.remote() for c in collectors], num_returns=4, timeout=5)
    print(f"collectors up: {len(ready)}, waiting for capacity: {len(pending)}", flush=True)
    step, announced = 1, False
    while step < 1000:
        try:
            version = ray.get(ps.apply_update.remote(0.01 * step))
            print(f"step {step} version {version}", flush=True)
        except ray.exceptions.RayActorError as e:
            print(f"step {step}: parameter server error, retrying: {type(e).__name__}", flush=True)
            if not announced:
                print("READY after parameter-server error", flush=True)
                announced = True
        step += 1
        time.sleep(0.3)


if __name__ == "__main__":
    main()
