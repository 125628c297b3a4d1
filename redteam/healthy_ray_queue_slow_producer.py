"""Healthy: a consumer actor waits on an empty ray.util.queue.Queue; the producer computes ~90 s before each put.

Scenario: a hyper-parameter search: a `propose` task fits a surrogate model (a silent numpy
loop, ~90 s) before it puts each of 5 candidate configs on a `ray.util.queue.Queue`; a Trainer
actor takes them with `queue.get(block=True)` and "trains" each in a moment. Between puts: the
Trainer waits in ray.get on the Queue actor's `get`, the Queue actor's coroutine awaits
`asyncio.Queue.get` on an empty queue, the producer is busy on CPU, nothing is logged.
Mechanism (none: healthy): a consumer on an empty queue whose only producer is alive, computing,
and puts every ~90 s (5 puts, ~7.5 minutes).
Truth: no hang. A right diagnosis is no-hang or inconclusive; async-await-stuck / queue-get-wait /
a hang naming the Trainer or the Queue actor is a false hang.
"""
# redteam-settle: 25
import os
import time

import ray
from ray.util.queue import Queue


@ray.remote(num_cpus=0.5)
def propose(queue, n: int, seconds_each: float) -> int:
    import numpy as np

    rng = np.random.default_rng(2)
    for cand in range(n):
        a = rng.standard_normal((350, 350))
        end = time.time() + seconds_each
        fits = 0
        while time.time() < end:
            a = np.tanh(a @ a.T / 350.0)
            fits += 1
        queue.put({"cand": cand, "lr": float(abs(a[0, 0])) * 1e-3, "fits": fits})
    return n


@ray.remote(num_cpus=0.1)
class Trainer:
    def run(self, queue, n: int) -> list:
        scores = []
        for _ in range(n):
            cfg = queue.get(block=True)
            scores.append(round(cfg["lr"] * 1000, 3))
        return scores


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    queue = Queue(maxsize=10)
    trainer = Trainer.remote()
    out = trainer.run.remote(queue, 5)
    prod = propose.remote(queue, 5, 90.0)
    print("READY searching", flush=True)
    print(ray.get([out, prod]))


if __name__ == "__main__":
    main()
