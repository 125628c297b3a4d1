"""Healthy: an import whose module body waits ~90 s on pool jobs while a second call waits to import it.

Scenario: Indexer (max_concurrency=2) imports `_slow_shards` on first use. The module's body loads
its shards through a ThreadPoolExecutor and waits for them (`list(_POOL.map(...))`); the jobs sleep
in a loop (a slow download) and do NOT import the module. A second `lookup` call imports the same
module meanwhile and waits in importlib's `_ModuleLock.acquire` until the first import finishes.

Mechanism: an import lock held by a thread that waits on pool jobs which will finish: slow, not stuck.
Truth: no hang (after ~90 s both calls return). A diagnosis must not call it an import-lock deadlock:
the holder waits on jobs that are not waiting for the import lock.
"""
import os
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class Indexer:
    def lookup(self, key: str) -> int:
        import _slow_shards

        return _slow_shards.lookup(key)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ix = Indexer.remote()
    first = ix.lookup.remote("alpha")
    time.sleep(1.0)
    second = ix.lookup.remote("beta")
    print("READY: two lookups, the first importing a module that loads shards for ~90 s", flush=True)
    print(ray.get([first, second]))


if __name__ == "__main__":
    main()
