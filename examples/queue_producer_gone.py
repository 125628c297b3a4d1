"""Streaming data loader: the producer's task fails, the trainer waits on the queue forever.

Scenario
    A ``DataLoaderWorker`` actor streams tokenized batches into a ``ray.util.queue.Queue``; a
    ``Trainer`` actor consumes them with a blocking ``queue.get()``. The driver starts the
    producer's ``produce`` task (fire-and-forget: its ObjectRef is never waited on) and then
    waits for ``Trainer.fit``.

Mechanism
    After a few good batches the producer hits a malformed record (``None`` text in shard
    ``shard-0003``) and ``produce`` raises ``AttributeError``. The exception lands in the
    ObjectRef nobody looks at; the actor stays ALIVE and idle. The consumer's ``queue.get()``
    (no timeout) blocks forever in ``Queue.get`` (``ray/util/queue.py``), waiting on the
    ``_QueueActor``. The driver raises nothing: the producer's traceback shows up only as an
    ``Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1')`` line in the job log
    (printed because the ObjectRef was dropped) and in the State API as a FAILED task.

What misleads
    The producer's actor is ALIVE and idle, so it looks healthy and the consumer's code gets
    read first. Wrong: its ``produce`` task is FAILED and the error sits in an ObjectRef nobody
    fetched; check the job's FAILED tasks.

Expected diagnosis
    ``producer-gone``: Trainer.fit is blocked in ``Queue.get``; the queue's only producer,
    ``DataLoaderWorker.produce``, is FAILED (TASK_EXECUTION_EXCEPTION) while the actor is ALIVE
    and idle. Culprit: DataLoaderWorker. The _QueueActor (async, idle in its event loop) and the
    driver are victims.
"""

import os
from dataclasses import asdict, dataclass

import ray
from ray.util.queue import Queue

EXPECTED = {
    "verdict": "hang",
    "pattern": "producer-gone",
    "culprits": [{"class_name": "DataLoaderWorker", "rank": None}],
    "notes": "DataLoaderWorker.produce put 3 batches then raised AttributeError on a None "
    "record (task FAILED, actor ALIVE idle, ObjectRef never awaited); Trainer.fit blocks in "
    "ray.util.queue Queue.get() with no timeout; driver waits on Trainer.fit.",
}


@dataclass
class StreamConfig:
    shards: tuple = ("shard-0000", "shard-0001", "shard-0002", "shard-0003", "shard-0004")
    records_per_shard: int = 8
    queue_maxsize: int = 16
    num_train_steps: int = 5
    seq_len: int = 16


def read_shard(name: str, n: int) -> list:
    records = [f"{name} record {i} lorem ipsum dolor sit amet" for i in range(n)]
    if name == "shard-0003":
        records[5] = None  # a null text field in the source parquet
    return records


@ray.remote(num_cpus=0.1)
class DataLoaderWorker:
    def __init__(self, queue, cfg: dict):
        self.cfg = StreamConfig(**cfg)
        self.queue = queue

    def produce(self) -> int:
        produced = 0
        for shard in self.cfg.shards:
            records = read_shard(shard, self.cfg.records_per_shard)
            batch = [r.lower().split()[: self.cfg.seq_len] for r in records]
            self.queue.put(batch)
            produced += 1
            print(f"[loader] put batch {produced} from {shard}", flush=True)
        self.queue.put(None)  # end of stream
        return produced


@ray.remote(num_cpus=0.1)
class Trainer:
    def __init__(self, queue, cfg: dict):
        self.cfg = StreamConfig(**cfg)
        self.queue = queue
        self.vocab = {}

    def fit(self) -> dict:
        for step in range(self.cfg.num_train_steps):
            batch = self.queue.get()  # blocks until the loader puts the next batch
            if batch is None:
                break
            for tokens in batch:
                for t in tokens:
                    self.vocab.setdefault(t, len(self.vocab))
            print(f"[trainer] step {step}: {len(batch)} sequences, vocab {len(self.vocab)}",
                  flush=True)
        return {"vocab": len(self.vocab)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = StreamConfig()
    queue = Queue(maxsize=cfg.queue_maxsize, actor_options={"num_cpus": 0.1})
    loader = DataLoaderWorker.remote(queue, asdict(cfg))
    trainer = Trainer.remote(queue, asdict(cfg))
    loader.produce.remote()  # runs in the background; streams into the queue
    print("READY: Trainer.fit -> Queue.get() fed by DataLoaderWorker.produce", flush=True)
    print(ray.get(trainer.fit.remote()), flush=True)


if __name__ == "__main__":
    main()
