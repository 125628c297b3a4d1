"""Healthy: the driver's one Pool(maxtasksperchild=1).map over minutes of tasks; workers are replaced after each task.

Scenario: as healthy_pool_maxtasksperchild, but the entrypoint script makes one blocking call,
`pool.map(extract, range(240), chunksize=1)` on a local 2-process
`multiprocessing.Pool(2, maxtasksperchild=1)`, ~3 s of CPU per task (~6 minutes in all), and prints
nothing until it returns. Each worker exits after its one task and the pool starts a new one: the
pool's pids change all the time, as in a crash loop, but every exit is a finished task. The driver
waits in `Pool.map` (`MapResult.wait` -> `Event.wait`); nothing raises, no traceback is printed.

Mechanism: children exiting and being replaced by design, each after finishing a task; the map
advances (the children compute, results arrive) while the driver is silent.
Truth: not a hang (healthy, ~6 min of work). Fix: none; the tool must not call it crash-loop or
hang (children that exit without a repeated traceback are no crash loop).
"""
import multiprocessing as mp
import os
import time

import ray


def extract(i: int) -> float:
    t0 = time.monotonic()
    acc = 0.0
    k = 0
    while time.monotonic() - t0 < 3.0:
        acc += (k * 2654435761 + i) % 1000003 / 1000003.0
        k += 1
    return acc / max(1, k)


@ray.remote(num_cpus=0.1)
def cluster_ok() -> bool:
    return True


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    assert ray.get(cluster_ok.remote())
    pool = mp.get_context("fork").Pool(2, maxtasksperchild=1)
    print("READY extracting features on a recycling pool (one map)", flush=True)
    values = pool.map(extract, range(240), chunksize=1)
    pool.close()
    pool.join()
    print(f"mean feature {sum(values) / len(values):.4f}")


if __name__ == "__main__":
    main()
