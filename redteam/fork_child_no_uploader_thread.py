"""A forked worker hands results to the parent's uploader thread, which does not exist in the child.

Scenario: ShardExporter starts an uploader thread in `__init__` that consumes `self.pending`
(a queue.Queue) and calls `task_done()`. export() forks a multiprocessing child (start method
"fork") per shard; the child computes and calls `self.upload(blob)`: `self.pending.put(blob)` then
`self.pending.join()` "to make sure it is uploaded before we exit". Only the forking thread
survives fork(): the child has the queue but no uploader thread, so join() waits for a
task_done() nobody in the child will call (the child's MainThread in Condition.wait under
Queue.join). The parent's export thread waits in `proc.join()` (waitpid) for the child; its own
uploader thread is alive and idle in `pending.get()` — of the parent's queue, a different object.
The driver waits in ray.get.

Mechanism: a thread that exists only in the fork parent: the child's Queue.join waits for a
consumer that was not copied by fork.
Truth: culprit the child's `self.pending.join()` in ShardExporter.upload (relies on the parent's
uploader thread); the parent's proc.join() is its victim. Fix: send results back through a
multiprocessing.Queue/pipe and upload in the parent, use the "spawn" start method with a consumer
started in the child, or upload synchronously in the child.
"""
import multiprocessing as mp
import os
import queue
import threading
import time

import ray


@ray.remote(num_cpus=0.5)
class ShardExporter:
    def __init__(self):
        self.pending = queue.Queue()
        self.uploaded = 0
        threading.Thread(target=self._uploader, name="uploader", daemon=True).start()

    def _uploader(self):
        while True:
            blob = self.pending.get()
            time.sleep(0.01)  # the "upload"
            self.uploaded += len(blob)
            self.pending.task_done()

    def upload(self, blob):
        self.pending.put(blob)
        self.pending.join()

    def _export_shard(self, shard):
        blob = bytes((shard * i) % 251 for i in range(200_000))
        print(f"child {os.getpid()}: shard {shard} encoded, uploading", flush=True)
        self.upload(blob)
        print(f"child {os.getpid()}: shard {shard} uploaded", flush=True)

    def export(self, shard):
        ctx = mp.get_context("fork")
        proc = ctx.Process(target=self._export_shard, args=(shard,), name=f"export-{shard}")
        proc.start()
        print(f"export: forked child {proc.pid} for shard {shard}; joining", flush=True)
        proc.join()
        return proc.exitcode


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ex = ShardExporter.remote()
    ref = ex.export.remote(3)
    print("READY: driver -> ShardExporter.export (forked child's Queue.join has no consumer thread)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
