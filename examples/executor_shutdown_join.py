"""Shard uploader that leaves its ThreadPoolExecutor block before sending the workers' stop sentinels.

Scenario
    An ``Uploader`` actor pushes checkpoint shards to storage with two upload threads:
    ``upload_all`` starts two consumer loops on a ``ThreadPoolExecutor`` (``with`` block), each
    taking shard names from a ``queue.Queue`` until it reads ``None``, queues the shards, and
    queues one ``None`` per worker to stop them. The driver waits for ``upload_all`` in
    ``ray.get``.

Mechanism
    The sentinels are queued after the ``with`` block. Leaving the block calls
    ``executor.shutdown(wait=True)``, which joins the worker threads; the workers, their shards
    uploaded, wait in ``queue.Queue.get()`` for a sentinel that only the joining thread would put,
    after the join returns. The method's thread waits on its own pool: no exception, no log line,
    the actor ALIVE with one RUNNING call.

What misleads
    The upload threads sit in ``Queue.get`` and the method's thread in ``Thread.join``: it reads
    as "the pool is still working, the queue is waiting for more shards", and a queue wait with
    other threads alive in job code looks like one that another thread may still fill. Wrong:
    the other upload thread waits at the same ``get`` and the main thread is idle in
    ``Thread.join`` for these very threads — neither can put.

Expected diagnosis
    ``producer-gone``: the Uploader's upload threads are idle in ``Queue.get`` (``queue.py``); the
    only other thread running job code (the method's thread) waits in ``Thread.join`` under
    ``ThreadPoolExecutor.shutdown`` for them, so the put it would make after the join never runs.
    Culprit: Uploader (``upload_all``: put the sentinels inside the ``with`` block). The driver
    waits on ``upload_all``.
"""

import os
import queue
import time
from concurrent.futures import ThreadPoolExecutor

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "producer-gone",
    "culprits": [{"class_name": "Uploader", "rank": None}],
    "notes": "Uploader.upload_all leaves its ThreadPoolExecutor `with` block (shutdown(wait=True) "
    "joins the upload threads) before putting their None sentinels; the threads wait in "
    "queue.Queue.get forever; driver in ray.get on upload_all.",
}


@ray.remote(num_cpus=0.1)
class Uploader:
    def __init__(self, upload_seconds: float = 0.05):
        self.upload_seconds = upload_seconds

    def _consume(self, q: queue.Queue, done: list) -> None:
        while True:
            shard = q.get()
            if shard is None:
                return
            time.sleep(self.upload_seconds)  # stands in for the PUT to object storage
            done.append(shard)

    def upload_all(self, shards: list) -> int:
        q: queue.Queue = queue.Queue()
        done: list = []
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="upload") as ex:
            for _ in range(2):
                ex.submit(self._consume, q, done)
            for shard in shards:
                q.put(shard)
        for _ in range(2):
            q.put(None)  # too late: the `with` exit already joined the workers
        return len(done)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    uploader = Uploader.remote()
    print("READY: driver -> Uploader.upload_all (sentinels after the executor's with block)", flush=True)
    print(ray.get(uploader.upload_all.remote([f"ckpt/shard-{i:03d}" for i in range(6)])), flush=True)


if __name__ == "__main__":
    main()
