"""Healthy: the driver maps over a multiprocessing.Pool(maxtasksperchild=1); workers are replaced after each task.

Scenario: a feature-extraction job's entrypoint script connects to Ray, checks the cluster with
one small task, then runs 240 CPU-bound extraction tasks of ~3 s each on a local 2-process
`multiprocessing.Pool(2, maxtasksperchild=1)` (each worker leaks memory in a C extension, so the
team recycles it after every task). Each worker process exits after its one task and the pool
starts a new one: the pool's pids change all the time, as in a crash loop, but every exit is a
finished task. The driver waits in `pool.map` (`MapResult.wait` -> `Event.wait`) for ~6 minutes
and prints a progress line every 40 tasks (from a callback-free imap loop); nothing raises, no
traceback is ever printed.

Mechanism: children exiting and being replaced by design, each after finishing a task; the map
advances (the children compute, results arrive).
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
    print("READY extracting features on a recycling pool", flush=True)
    done = 0
    total = 0.0
    for value in pool.imap(extract, range(240)):
        done += 1
        total += value
        if done % 40 == 0:
            print(f"extracted {done}/240", flush=True)
    pool.close()
    pool.join()
    print(f"mean feature {total / done:.4f}")


if __name__ == "__main__":
    main()
