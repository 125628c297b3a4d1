"""Healthy: more tasks than the cluster has CPUs for; most wait their turn behind busy ones.

Scenario: a preprocessing job submits 24 shard tasks of `num_cpus=2` to a 4-CPU cluster; each
computes for ~40 s (numpy). Two run at a time; 22 are PENDING for resources, and the driver waits
in `ray.get` on all of them. Between two finishes (every ~40 s) nothing changes in the State API.

Mechanism: unmet demand whose holders are RUNNING, busy, and will finish: a backlog, not a
starvation. Truth: no hang. `no-hang` or `inconclusive` (the busy holders named) are right.
"""
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=2)
def shard(i: int) -> float:
    a = np.random.default_rng(i).standard_normal((300, 300))
    end, acc = time.time() + 40, 0.0
    while time.time() < end:
        acc += float(np.linalg.norm(a @ a))
    return acc


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    refs = [shard.remote(i) for i in range(24)]
    print("READY: 24 shard tasks of 2 CPUs on 4 CPUs", flush=True)
    done = 0
    while refs:
        ready, refs = ray.wait(refs, num_returns=1)
        done += 1
        print(f"shard done ({done}/24)", flush=True)


if __name__ == "__main__":
    main()
