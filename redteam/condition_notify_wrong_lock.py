"""A producer thread updates a Condition's predicate under a different lock and dies in notify_all().

Scenario: ShardIndex (threaded actor) builds an index on a background `loader` thread. The
readiness predicate `self.loaded >= need` is guarded by `self.ready = threading.Condition(self._rows_lock)`,
but the loader was written against the stats lock: it does `with self._stats_lock: self.loaded += 1;
self.ready.notify_all()`. `notify_all()` on a Condition whose own lock is not held raises
`RuntimeError: cannot notify on un-acquired lock` on the first shard: the loader thread dies (its
traceback is in the worker's stderr) after loading one shard of eight. `lookup()` waits with
`self.ready.wait_for(lambda: self.loaded >= 8, timeout=5)` in a `while` loop that logs
"still loading" every 5 s -- a timed wait that looks like a healthy poll.
Mechanism: condition's predicate updated under the wrong lock; the notifier thread raised and is
gone; nothing else in the process will ever advance `loaded`. The timed wait never ends.
Truth: hang; culprit ShardIndex's dead `loader` thread at `self.ready.notify_all()` (the wrong
lock: `with self._stats_lock:`); the lookup thread is the victim. Fix: update and notify under
`with self.ready:` (the condition's own lock). Driver in ray.get(lookup).
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class ShardIndex:
    def __init__(self, n_shards=8):
        self._rows_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self.ready = threading.Condition(self._rows_lock)
        self.loaded = 0
        self.n_shards = n_shards
        self.rows = {}
        threading.Thread(target=self._load, name="loader", daemon=True).start()

    def _load(self):
        for shard in range(self.n_shards):
            time.sleep(0.5)  # read the shard
            self.rows[shard] = list(range(shard * 100, shard * 100 + 100))
            with self._stats_lock:
                self.loaded += 1
                self.ready.notify_all()

    def lookup(self, key):
        with self.ready:
            while not self.ready.wait_for(lambda: self.loaded >= self.n_shards, timeout=5):
                print(f"still loading: {self.loaded}/{self.n_shards} shards", flush=True)
            return self.rows[key // 100][key % 100]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    idx = ShardIndex.remote()
    time.sleep(2)
    print("READY: driver -> ShardIndex.lookup (loader died in notify_all on the wrong lock)", flush=True)
    print(ray.get(idx.lookup.remote(512)))


if __name__ == "__main__":
    main()
