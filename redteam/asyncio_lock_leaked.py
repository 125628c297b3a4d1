"""An async KV cache leaks its asyncio.Lock on a failed update; every later read awaits it.

Mechanism: KVCache is an async actor; update() does `await self.lock.acquire()`, validates, writes,
releases, without try/finally. One update with a None value raises after acquire, so the lock stays
locked with no coroutine holding it. get() awaits the lock forever: the actor's event loop is
idle (the coroutine is suspended), no thread is blocked. Driver in ray.get(get).
Truth: culprit KVCache.update (lock acquired without release on the error path); fix:
`async with self.lock:`.
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class KVCache:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.data = {}

    async def update(self, k, v):
        await self.lock.acquire()
        if v is None:
            raise ValueError(f"no value for {k}")
        self.data[k] = v
        self.lock.release()

    async def get(self, k):
        async with self.lock:
            return self.data.get(k)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    kv = KVCache.remote()
    ray.get(kv.update.remote("step", 1))
    try:
        ray.get(kv.update.remote("lr", None))
    except ray.exceptions.RayTaskError as e:
        print("update failed:", type(e.cause).__name__, flush=True)
    print("READY: driver -> KVCache.get (asyncio.Lock leaked by a failed update)", flush=True)
    print(ray.get(kv.get.remote("step")))


if __name__ == "__main__":
    main()
