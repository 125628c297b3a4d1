"""An actor leaves a ThreadPoolExecutor `with` block before sending its workers' stop sentinels.

Mechanism: Uploader.upload_all starts two consumer loops on a ThreadPoolExecutor, each taking
files from a queue.Queue until it reads None. The files are queued inside the `with` block, but the
None sentinels are queued after it. Leaving the block calls executor.shutdown(wait=True), which
joins the worker threads; the workers, their files done, wait in queue.get for a sentinel that only
the joining thread would put, after the join. Driver in ray.get(upload_all).
Truth: culprit Uploader.upload_all (sentinels after the `with` block: a self-deadlock of the
method's thread with its own pool); fix: queue the sentinels inside the block (or use ex.map).
"""
import os
import queue
import time
from concurrent.futures import ThreadPoolExecutor

import ray


@ray.remote(num_cpus=0.1)
class Uploader:
    def _consume(self, q, done):
        while True:
            item = q.get()
            if item is None:
                return
            time.sleep(0.05)
            done.append(item)

    def upload_all(self, files):
        q, done = queue.Queue(), []
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="upload") as ex:
            for _ in range(2):
                ex.submit(self._consume, q, done)
            for f in files:
                q.put(f)
        for _ in range(2):
            q.put(None)
        return len(done)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    up = Uploader.remote()
    print("READY: driver -> Uploader.upload_all (executor shutdown before sentinels)", flush=True)
    print(ray.get(up.upload_all.remote([f"shard-{i}" for i in range(6)])))


if __name__ == "__main__":
    main()
