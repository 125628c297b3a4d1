"""Healthy: a threaded actor's call waits in Condition.wait_for until a slow producer thread fills a batch.

Scenario: a BatchAssembler actor (max_concurrency=2) assembles training batches of 4 feature blocks.
`__init__` starts a `featurize` thread that computes each block with ~40 s of silent numpy matrix
products (GIL released in BLAS), then appends it to `self.blocks` under `self.cond` and calls
`notify_all()`. `next_batch()` waits in `self.cond.wait_for(lambda: len(self.blocks) >= 4)`.
Mechanism: the waiter is idle in `Condition.wait` (under `wait_for`) for minutes; the only thread
that can satisfy the predicate is alive and CPU-busy in numpy with a static Python stack; nothing
is logged until the batch is complete. Driver in ray.get on next_batch.
Truth: healthy (no culprit): the producer appends a block every ~40 s and the predicate is true
after ~3 minutes; next_batch returns. A hang verdict is wrong (the working thread is `featurize`).
"""
# redteam-settle: 25
import os
import threading
import time

import numpy as np
import ray


@ray.remote(num_cpus=1, max_concurrency=2)
class BatchAssembler:
    def __init__(self):
        self.cond = threading.Condition()
        self.blocks = []
        threading.Thread(target=self._featurize, name="featurize", daemon=True).start()

    def _featurize(self):
        rng = np.random.default_rng(0)
        for _ in range(6):
            m = rng.standard_normal((500, 500))
            t0 = time.time()
            while time.time() - t0 < 40:
                m = np.tanh(m @ m.T / 500.0)
            with self.cond:
                self.blocks.append(float(m.sum()))
                self.cond.notify_all()

    def next_batch(self):
        with self.cond:
            self.cond.wait_for(lambda: len(self.blocks) >= 4)
            batch, self.blocks = self.blocks[:4], self.blocks[4:]
        return batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    a = BatchAssembler.remote()
    ref = a.next_batch.remote()
    print("READY: driver -> BatchAssembler.next_batch (Condition.wait_for a batch of 4; featurize computes)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
