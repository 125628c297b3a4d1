"""Prefetching data actor whose background producer thread died: the consumer waits on queue.Queue forever.

Scenario
    A ``BatchPrefetcher`` actor hides decoding latency from the trainer: ``__init__`` starts a
    background thread that reads JSON-lines records shard by shard, decodes them into batches
    and puts them into a bounded ``queue.Queue``. ``next_batch()`` just takes the next batch
    from that queue. The ``Trainer`` actor asks for one batch per step
    (``ray.get(prefetcher.next_batch.remote())``) and applies an SGD update.

Mechanism
    Shard 2 contains a record written by an older exporter, without the ``"label"`` field. The
    producer thread raises ``KeyError: 'label'`` while decoding it and exits; Python prints
    the traceback ("Exception in thread prefetch-shards") to the worker's stderr and nothing
    else happens: the actor stays ALIVE, no task fails, ``next_batch`` is still callable. The
    batches decoded before the bad record are consumed, then ``next_batch`` blocks in
    ``queue.Queue.get()`` (no timeout, no sentinel) forever; the trainer waits in ``ray.get`` on
    it and the driver waits on the trainer.

What misleads
    The actor is ALIVE, no task FAILED, ``next_batch`` is still callable: a slow decoder. Wrong:
    ``Queue.get()`` waits on a ``queue.Queue`` only threads of this process fill, and no other
    thread runs job code - the producer thread died on ``KeyError: 'label'`` (in the worker's
    ``.err`` log).

Expected diagnosis
    ``producer-gone``: the BatchPrefetcher's ``next_batch`` is idle in ``Queue.get``
    (``queue.py``) and no other thread of that process runs job code — the thread that should put
    into the queue is gone; the worker's ``.err`` log holds its traceback (``KeyError:
    'label'``). Culprit: BatchPrefetcher. Trainer.fit waits in ray.get on ``next_batch``; the
    driver waits on Trainer.fit.
"""

import json
import os
import queue
import random
import threading
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "producer-gone",
    "culprits": [{"class_name": "BatchPrefetcher", "rank": None}],
    "notes": "BatchPrefetcher's producer thread raised KeyError('label') on a record of shard 2 "
    "and exited (traceback only in the worker's .err log); next_batch blocks in "
    "queue.Queue.get() with no other thread left to put; Trainer.fit in ray.get on next_batch, "
    "driver on Trainer.fit.",
}


@dataclass
class DataConfig:
    num_shards: int = 4
    records_per_shard: int = 64
    batch_size: int = 16
    features: int = 4
    prefetch_depth: int = 4
    num_steps: int = 40
    lr: float = 0.05
    seed: int = 0


def make_shard(shard: int, cfg: DataConfig) -> list:
    """JSON-lines records as the exporter wrote them (shard 2 comes from the old exporter)."""
    rng = random.Random(cfg.seed * 7919 + shard)
    lines = []
    for i in range(cfg.records_per_shard):
        x = [round(rng.uniform(-1, 1), 4) for _ in range(cfg.features)]
        record = {"id": f"{shard}-{i}", "x": x, "label": round(sum(x), 4)}
        if shard == 2 and i == 37:
            record = {"id": f"{shard}-{i}", "x": x, "target": round(sum(x), 4)}  # v1 schema
        lines.append(json.dumps(record))
    return lines


@ray.remote(num_cpus=0.25)
class BatchPrefetcher:
    def __init__(self, cfg: dict):
        self.cfg = DataConfig(**cfg)
        self._queue: queue.Queue = queue.Queue(maxsize=self.cfg.prefetch_depth)
        self._thread = threading.Thread(target=self._produce, name="prefetch-shards", daemon=True)
        self._thread.start()

    def _decode(self, line: str) -> tuple:
        record = json.loads(line)
        return record["x"], record["label"]

    def _produce(self) -> None:
        for shard in range(self.cfg.num_shards):
            batch = []
            for line in make_shard(shard, self.cfg):
                batch.append(self._decode(line))
                if len(batch) == self.cfg.batch_size:
                    self._queue.put(batch)
                    batch = []
            print(f"[prefetch] shard {shard} decoded", flush=True)
        self._queue.put(None)  # end of data

    def next_batch(self):
        return self._queue.get()


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, prefetcher, cfg: dict):
        self.cfg = DataConfig(**cfg)
        self.prefetcher = prefetcher
        self.w = [0.0] * self.cfg.features

    def fit(self) -> dict:
        loss = float("nan")
        for step in range(self.cfg.num_steps):
            batch = ray.get(self.prefetcher.next_batch.remote())
            if batch is None:
                break
            loss = 0.0
            grad = [0.0] * self.cfg.features
            for x, y in batch:
                err = sum(wi * xi for wi, xi in zip(self.w, x)) - y
                loss += err * err / len(batch)
                for j, xi in enumerate(x):
                    grad[j] += 2 * err * xi / len(batch)
            self.w = [wi - self.cfg.lr * g for wi, g in zip(self.w, grad)]
            print(f"[trainer] step {step} loss {loss:.4f}", flush=True)
        return {"loss": loss, "w": self.w}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = DataConfig()
    prefetcher = BatchPrefetcher.remote(asdict(cfg))
    trainer = Trainer.remote(prefetcher, asdict(cfg))
    print("READY: Trainer.fit -> BatchPrefetcher.next_batch -> queue.Queue fed by a thread",
          flush=True)
    print(f"result: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
