"""Threaded checkpoint store where two methods take the same two locks in opposite order.

Scenario
    A ``CheckpointStore`` actor (``max_concurrency=2``, so two method calls run in parallel
    threads) keeps model weights and a metadata index, each guarded by its own
    ``threading.Lock``. The driver saves a checkpoint every step; every ``eval_every`` steps an
    ``Evaluator`` actor scores the latest checkpoint and asks the store to promote it to "best"
    while the next save is in flight.

Mechanism
    ``CheckpointStore.save`` takes ``_weights_lock`` then (after writing the shard files)
    ``_index_lock``; ``CheckpointStore.promote_best`` takes ``_index_lock`` then
    ``_weights_lock`` to copy the weights. Steps 0-2 save alone and succeed. At step 3 a save and
    a promotion run concurrently on the two actor threads, each holds one lock and waits for the
    other: a classic lock-order deadlock inside one process. The actor's tasks stay RUNNING; the
    driver waits on ``save`` and the Evaluator waits on ``promote_best``.

What misleads
    The threads stop at plain ``with lock:`` lines with no ``acquire`` frame, so the lines look
    merely slow, and the threads are unnamed (``Dummy-N``). Wrong: two threads of one actor idle
    at ``with`` lines of two different locks, each holding the other's, is the whole evidence of
    a lock-order deadlock.

Expected diagnosis
    ``lock-order-deadlock``: in the CheckpointStore process two threads (unnamed / ``Dummy-N``
    in py-spy) are idle on the ``with self._index_lock:`` line of ``save`` and the
    ``with self._weights_lock:`` line of ``promote_best`` (no ``acquire`` frame is shown).
    Culprit: CheckpointStore. The driver and Evaluator (in ray.get) are victims.
"""

import os
import threading
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "lock-order-deadlock",
    "culprits": [{"class_name": "CheckpointStore", "rank": None}],
    "notes": "CheckpointStore (max_concurrency=2): save holds _weights_lock and waits for "
    "_index_lock; promote_best holds _index_lock and waits for _weights_lock. Deadlocks at "
    "step 3 when the Evaluator's promote_best overlaps the driver's save.",
}


@dataclass
class CkptConfig:
    num_steps: int = 10
    eval_every: int = 3
    num_shards: int = 4
    shard_write_s: float = 0.05  # simulated fsync per shard
    param_count: int = 1024


@ray.remote(num_cpus=0.1, max_concurrency=2)
class CheckpointStore:
    def __init__(self, cfg: dict):
        self.cfg = CkptConfig(**cfg)
        self._weights_lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._weights = {}
        self._index = {"latest": None, "best": None, "history": []}

    def save(self, step: int, weights: list) -> int:
        with self._weights_lock:
            self._weights[step] = list(weights)
            for _ in range(self.cfg.num_shards):
                time.sleep(self.cfg.shard_write_s)  # write + fsync one shard
            with self._index_lock:
                self._index["latest"] = step
                self._index["history"].append(step)
        return step

    def latest(self) -> int:
        with self._index_lock:
            return self._index["latest"]

    def promote_best(self, step: int, score: float) -> dict:
        with self._index_lock:
            self._index["best"] = (step, score)
            time.sleep(self.cfg.shard_write_s)  # rewrite index file
            with self._weights_lock:
                self._weights["best"] = list(self._weights[step])
            return dict(self._index)


@ray.remote(num_cpus=0.1)
class Evaluator:
    def __init__(self, store):
        self.store = store

    def evaluate_latest(self) -> float:
        step = ray.get(self.store.latest.remote())
        score = 1.0 / (1 + step)
        ray.get(self.store.promote_best.remote(step, score))
        return score


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = CkptConfig()
    store = CheckpointStore.remote(asdict(cfg))
    evaluator = Evaluator.remote(store)
    weights = [0.0] * cfg.param_count
    pending_eval = None
    for step in range(cfg.num_steps):
        weights = [w + 0.01 for w in weights]
        if step > 0 and step % cfg.eval_every == 0:
            print(f"READY: step {step}: CheckpointStore.save || Evaluator -> "
                  "CheckpointStore.promote_best", flush=True)
            pending_eval = evaluator.evaluate_latest.remote()
            time.sleep(0.02)  # the evaluator call is in flight while we save
        ray.get(store.save.remote(step, weights))
        print(f"step {step}: checkpoint saved", flush=True)
        if pending_eval is not None:
            print(f"eval score {ray.get(pending_eval):.3f}", flush=True)
            pending_eval = None


if __name__ == "__main__":
    main()
