"""An async actor guards a refresh with a threading.Lock held across an await; a second call blocks the loop.

Scenario: TokenCache is an async actor (its methods are coroutines on one event loop thread).
`get_token()` does `with self._lock:` (a threading.Lock, "so two refreshes never race") and,
when the token is stale, `self.token = await self._refresh()` -- the refresh awaits the
identity service (`asyncio.sleep(0.5)` here) while still holding the lock. The driver sends two
`get_token` calls at once: the first takes the lock and suspends at the await; the second runs
on the same loop thread and blocks in `self._lock.acquire()` (a blocking C call). The loop
thread is stuck, so the first coroutine can never resume to release the lock.
Mechanism: a synchronous lock held by a suspended coroutine across an await; the waiter blocks
the very loop that would resume the holder.
Truth: hang; culprit TokenCache, `get_token`'s `with self._lock:` (line 33; the holder is
suspended at `await self._refresh()`, line 35). Fix: an `asyncio.Lock` (`async with`), never a
threading lock across an await.
Driver in ray.get of both calls.
"""
import asyncio
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1)
class TokenCache:
    def __init__(self):
        self._lock = threading.Lock()
        self.token = None
        self.expires = 0.0

    async def get_token(self, who):
        with self._lock:
            if self.token is None or time.time() > self.expires:
                self.token = await self._refresh(who)
                self.expires = time.time() + 300
            return self.token

    async def _refresh(self, who):
        await asyncio.sleep(0.5)
        return f"tok-{who}-{int(time.time())}"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    c = TokenCache.remote()
    ray.get(c.__ray_ready__.remote())
    refs = [c.get_token.remote("a"), c.get_token.remote("b")]
    time.sleep(3)
    print("READY: driver -> TokenCache.get_token x2 (threading.Lock across an await)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
