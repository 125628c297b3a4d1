"""An async actor's method calls a sync helper that waits for a coroutine scheduled on its own loop.

Scenario: EmbeddingCache is an async actor. Its sync helper `_lookup_sync` (shared with a
threaded code path) schedules `_fetch` on the actor's event loop with
asyncio.run_coroutine_threadsafe and waits on the returned concurrent Future. `get` (a coroutine,
running on that loop) calls the helper directly: the loop thread blocks in Future.result, so the
loop can never run `_fetch`. Every later call (the driver's `stats`) stays queued on the loop.

Mechanism: an event loop blocked waiting for work scheduled on itself (a sync wait on the loop
thread for a coroutine of the same loop).
Truth: culprit EmbeddingCache (its loop thread in Future.result inside `get`); the driver is the
victim. Fix: `await self._fetch(key)` in coroutines; call the threadsafe helper only from other
threads.
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class EmbeddingCache:
    def __init__(self):
        self.loop = None
        self.table: dict[str, list[float]] = {}

    async def _fetch(self, key: str) -> list[float]:
        await asyncio.sleep(0.01)
        return [float(ord(c)) for c in key[:4]]

    def _lookup_sync(self, key: str) -> list[float]:
        fut = asyncio.run_coroutine_threadsafe(self._fetch(key), self.loop)
        return fut.result()

    async def get(self, key: str) -> list[float]:
        self.loop = asyncio.get_running_loop()
        if key not in self.table:
            self.table[key] = self._lookup_sync(key)
        return self.table[key]

    async def stats(self) -> int:
        return len(self.table)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cache = EmbeddingCache.remote()
    ref = cache.get.remote("token-17")
    stats = cache.stats.remote()
    print("READY looking up", flush=True)
    print(ray.get([ref, stats]))


if __name__ == "__main__":
    main()
