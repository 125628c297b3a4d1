"""A lock held across a remote call whose callee's pool threads call back into the lock holder.

Scenario: Catalog (threaded, max_concurrency=4) refreshes its rows under `self._lock`: inside the
`with`, it calls `ray.get(enricher.enrich.remote(keys))`. Enricher.enrich fans the keys out to a
ThreadPoolExecutor and waits on the futures; each pool thread calls
`ray.get(catalog.lookup.remote(key))`. Catalog.lookup runs (a free concurrency slot) and blocks at
`with self._lock:` — held by refresh, which waits for enrich, which waits for the pool futures,
which wait for lookup.

Mechanism: a cycle through a Python lock, an actor call, thread-pool futures and a callback actor
call: Catalog.refresh (holds _lock) → Enricher.enrich → pool threads → Catalog.lookup (waits _lock).
Truth: culprit Catalog.refresh (holds its lock across a remote call that calls back into Catalog);
Enricher and its pool threads are on the cycle; the driver is a victim. Fix: copy the state and
release the lock before the remote call (or make lookup lock-free).
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class Catalog:
    def __init__(self):
        self._lock = threading.Lock()
        self.rows: dict[str, int] = {"a": 1, "b": 2}
        self.enricher = None

    def attach(self, enricher) -> None:
        self.enricher = enricher

    def refresh(self, keys: list[str]) -> int:
        with self._lock:
            fresh = ray.get(self.enricher.enrich.remote(keys))
            self.rows.update(fresh)
        return len(self.rows)

    def lookup(self, key: str) -> int | None:
        with self._lock:
            return self.rows.get(key)


@ray.remote(num_cpus=0.1)
class Enricher:
    def __init__(self, catalog):
        self.catalog = catalog
        self.pool = ThreadPoolExecutor(max_workers=3)

    def _one(self, key: str) -> tuple[str, int]:
        base = ray.get(self.catalog.lookup.remote(key))
        return key, (base or 0) + 10

    def enrich(self, keys: list[str]) -> dict[str, int]:
        futs = [self.pool.submit(self._one, k) for k in keys]
        return dict(f.result() for f in futs)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    catalog = Catalog.remote()
    enricher = Enricher.remote(catalog)
    ray.get(catalog.attach.remote(enricher))
    ref = catalog.refresh.remote(["a", "b", "c"])
    print("READY refreshing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
