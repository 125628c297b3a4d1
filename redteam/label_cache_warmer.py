"""A refresh thread takes the actor's RLock and returns early without releasing it; the thread exits.

Scenario: LabelCache keeps its label table behind `self._lock = threading.RLock()` (re-entrant,
because `lookup` calls `_get` which also locks). `warm()` starts a background thread `_refresh`
that does `self._lock.acquire()`, reloads the table, and on a stale manifest returns early
("nothing to do") -- the early `return` skips `self._lock.release()` (no try/finally, no `with`).
The thread ends. An RLock remembers its owner thread id; only that thread could release it and it
is gone. `lookup()` (the driver's next call) blocks forever at `with self._lock:`.
Mechanism: a lock held by a thread that no longer exists (acquire without release on an early
return).
Truth: hang; culprit LabelCache, `_refresh`'s early `return` (line 35) after `self._lock.acquire()`
(line 31); the waiter is `lookup`'s `with self._lock:` (line 47). Fix: `with self._lock:` in
`_refresh` (or try/finally).
Driver in ray.get(lookup).
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1)
class LabelCache:
    def __init__(self):
        self._lock = threading.RLock()
        self.labels = {i: f"label-{i}" for i in range(100)}
        self.version = 3

    def _refresh(self, manifest_version):
        self._lock.acquire()
        time.sleep(0.2)
        if manifest_version <= self.version:
            print("manifest not newer; nothing to refresh", flush=True)
            return
        self.labels = {i: f"label-{i}-v{manifest_version}" for i in range(100)}
        self.version = manifest_version
        self._lock.release()

    def warm(self, manifest_version):
        t = threading.Thread(target=self._refresh, args=(manifest_version,), name="label-refresh")
        t.start()
        t.join()
        return "warmed"

    def lookup(self, keys):
        with self._lock:
            return [self._get(k) for k in keys]

    def _get(self, k):
        with self._lock:
            return self.labels.get(k)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cache = LabelCache.remote()
    print(ray.get(cache.warm.remote(2)))
    ref = cache.lookup.remote([1, 2, 3])
    time.sleep(1)
    print("READY: driver -> LabelCache.lookup (RLock owned by the exited refresh thread)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
