"""A Ray Data map_batches UDF actor re-takes its own lock; the trainer waits in iter_batches.

Scenario
    Feature preprocessing for training: a ``Trainer`` actor reads a Ray Data pipeline
    (``range`` -> ``map_batches(Featurizer, concurrency=2)`` on an actor pool) with
    ``iter_batches``. ``Featurizer`` keeps a vocabulary cache behind a ``threading.Lock``; every
    256 rows it refreshes the cache's statistics.

Mechanism
    ``__call__`` takes the lock to update the cache and, inside, calls ``_refresh_stats``, which
    takes the same (non-reentrant) lock again: the UDF actor that reaches the refresh blocks on
    itself forever. Its batch never comes out of the operator; the streaming executor keeps
    waiting for it, and the trainer's ``iter_batches`` waits for the next block, which can never
    come. The driver waits in ``ray.get`` on the trainer.

What misleads
    Ray Data's own actors (the stats actor, the actor location tracker, the autoscaling
    coordinator) keep answering calls on a timer: their finished calls look like the job's
    progress. The trainer's wait is inside Ray Data's iterator, not on a task it submitted; no
    task row links it to the operator's actors. The blocked UDF actor shows as a plain lock wait
    in the table with nothing pointing at it.

Expected diagnosis
    ``lock-self-deadlock`` in the ``MapWorker(MapBatches(Featurizer))`` actor at the ``with
    self.lock:`` of ``_refresh_stats``. Chain: driver -> Trainer (waiting in iter_batches on the
    dataset's ``MapBatches(Featurizer)`` operator, whose output stopped) -> the operator's actor.
"""

import os
import threading

import numpy as np
import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "lock-self-deadlock",
    "culprits": [{"class_name": "MapWorker(MapBatches(Featurizer))", "rank": None}],
    "ready": "refreshing stats",
    "ready_timeout_s": 300,
    "notes": "Featurizer.__call__ holds self.lock and calls _refresh_stats, which takes it again; "
    "the trainer waits in iter_batches for the operator's next block.",
}

REFRESH_EVERY = 256


class Featurizer:
    def __init__(self):
        self.lock = threading.Lock()
        self.seen = 0
        self.vocab: dict = {}

    def _refresh_stats(self):
        with self.lock:  # BUG: the caller already holds self.lock (threading.Lock is not reentrant)
            self.mean = float(np.mean(list(self.vocab.values()) or [0]))

    def __call__(self, batch: dict) -> dict:
        with self.lock:
            for v in batch["id"]:
                self.vocab[int(v) % 97] = self.vocab.get(int(v) % 97, 0) + 1
            self.seen += len(batch["id"])
            if self.seen >= REFRESH_EVERY:
                print(f"refreshing stats after {self.seen} rows", flush=True)
                self._refresh_stats()
                self.seen = 0
        return {"id": batch["id"], "bucket": batch["id"] % 97}


@ray.remote(num_cpus=0.5)
class Trainer:
    def train(self, ds) -> int:
        rows = 0
        for batch in ds.iter_batches(batch_size=64):
            rows += len(batch["id"])
        return rows


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ds = ray.data.range(20_000, override_num_blocks=100).map_batches(
        Featurizer, batch_size=64, concurrency=2, num_cpus=0.5)
    trainer = Trainer.remote()
    print("the trainer reads the featurized dataset", flush=True)
    print(ray.get(trainer.train.remote(ds)), flush=True)  # hangs: a Featurizer re-takes its own lock


if __name__ == "__main__":
    main()
