"""A Condition notified before anyone waits on it (lost wake-up): wait() without a predicate sleeps forever.

Scenario: ShardIndex.build() starts a `loader` thread that reads the shard list (fast: ~0.1 s) and
then does `with self.cond: self.cond.notify_all()`. The calling thread meanwhile compiles its
filters (~1 s) and only then does `with self.cond: self.cond.wait()` -- no predicate, no timeout,
no flag. The notify happened while nobody waited; a Condition keeps no memory of it. The loader
thread has ended; build() waits forever.
Mechanism: lost wake-up on a threading.Condition (notify before wait, no predicate).
Truth: hang; culprit ShardIndex, `build`'s `self.cond.wait()` (line 37) with no predicate; the only
notifier thread is gone. Fix: keep a flag and `self.cond.wait_for(lambda: self.loaded)`
(or a threading.Event).
Driver in ray.get(build).
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1)
class ShardIndex:
    def __init__(self):
        self.cond = threading.Condition()
        self.shards = []

    def _load(self):
        self.shards = [f"s3://bucket/shard-{i:04d}" for i in range(64)]
        with self.cond:
            self.cond.notify_all()

    def build(self):
        threading.Thread(target=self._load, name="loader", daemon=True).start()
        filters = [compile(f"x % {k} == 0", "<filter>", "eval") for k in range(2, 40)]
        time.sleep(1.0)
        with self.cond:
            self.cond.wait()
        return len(self.shards), len(filters)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    idx = ShardIndex.remote()
    ref = idx.build.remote()
    time.sleep(3)
    print("READY: driver -> ShardIndex.build (waits on a condition notified before it waited)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
