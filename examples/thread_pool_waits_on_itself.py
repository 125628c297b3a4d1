"""An actor's thread pool waits on itself: every worker runs a job that waits for a sub-job queued behind it.

Scenario
    A ``ShardIndexer`` actor builds a search index. ``build(shards)`` hands each shard to its
    ``ThreadPoolExecutor(max_workers=2)``; each shard job tokenizes its text by submitting a
    sub-job to the same pool and waiting on its ``Future``. The driver asks ``build`` for two
    shards, then (from another call) for the indexer's ``stats``.

Mechanism
    Both workers of the pool run a shard job, and both wait in ``Future.result()`` on a sub-job
    that sits in the pool's own work queue: no worker is free to run it, and none will be. The
    actor's ``build`` waits on the shard jobs' futures; ``stats`` is queued behind ``build`` on the
    sync actor (max_concurrency 1). No lock, no Ray-level cycle, no error.

What misleads
    ``Future.result`` waits in ``Condition.wait``, like an Event: a reading of "an event that a
    queued call (``stats``) would set" names the wrong mechanism and the wrong fix; ``stats`` sets
    nothing. The pool's threads are what to look at: they all wait on work of their own pool.

Expected diagnosis
    ``executor-self-wait``: ShardIndexer's pool (ThreadPoolExecutor-0, 2 workers) has every worker
    waiting on a Future of a job still queued in the same pool. Fix: never wait on a pool's
    future from inside the same pool (a second pool for the sub-jobs, or run the sub-job inline).
"""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "executor-self-wait",
    "culprits": [{"class_name": "ShardIndexer", "rank": None}],
    "notes": "ShardIndexer's ThreadPoolExecutor(max_workers=2): both workers run index_shard, which "
    "submits tokenize to the same pool and waits on its Future; no worker is left to run it.",
}


@ray.remote(num_cpus=0.25)
class ShardIndexer:
    def __init__(self):
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.indexed = 0
        # Both shard jobs start before either submits its sub-job (the pool's two workers are
        # taken): without it, a fast first job could finish its sub-job on the second worker
        # before the second shard job started, and the build would not hang.
        self._both_started = threading.Barrier(2)

    def tokenize(self, text: str) -> list:
        return text.split()

    def index_shard(self, shard: str) -> int:
        self._both_started.wait(timeout=60)
        tokens = self.pool.submit(self.tokenize, shard).result()
        self.indexed += 1
        return len(tokens)

    def build(self, shards: list) -> list:
        jobs = [self.pool.submit(self.index_shard, s) for s in shards]
        return [j.result() for j in jobs]

    def stats(self) -> dict:
        return {"indexed": self.indexed}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    indexer = ShardIndexer.remote()
    ray.get(indexer.__ray_ready__.remote())
    built = indexer.build.remote(["the quick brown fox", "jumps over the lazy dog"])
    time.sleep(0.5)
    stats = indexer.stats.remote()
    print("READY: building the index of 2 shards", flush=True)
    print(ray.get(built), ray.get(stats), flush=True)


if __name__ == "__main__":
    main()
