"""An async fetcher's asyncio.Semaphore permits are leaked by calls cancelled by wait_for timeouts.

Scenario: BlobFetcher (an async actor) bounds concurrent downloads with `asyncio.Semaphore(2)`.
`_guarded(key)` does `await self.sem.acquire()`, `await self._download(key)`, `self.sem.release()`
(no try/finally). `fetch(key)` wraps it in `asyncio.wait_for(self._guarded(key), timeout=1.0)` and
returns None on timeout. Two keys of the first batch are "cold" (their download takes 3 s): their
wait_for times out and cancels `_guarded` inside `_download`, so the CancelledError skips
`release()`: both permits are gone, with no coroutine holding them. The first batch returns (its
timed-out keys logged). The driver's second batch uses `fetch_nowait` (the bulk path, no timeout),
whose calls wait in `await self.sem.acquire()` forever. The event loop is idle (select), the four
calls are RUNNING.
Mechanism: asyncio semaphore leaked on a cancellation path (the permit is taken, the release is
skipped by CancelledError); no coroutine holds it.
Truth: hang; culprit BlobFetcher `_guarded` (acquire without try/finally, its `self.sem.release()`
skipped when wait_for cancels it); fix: `async with self.sem:`. Driver in ray.get(fetch_nowait...).
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class BlobFetcher:
    def __init__(self):
        self.sem = asyncio.Semaphore(2)
        self.cold = {"blob-3", "blob-5"}

    async def _download(self, key):
        await asyncio.sleep(3.0 if key in self.cold else 0.1)
        return f"{key}:{len(key) * 1024}"

    async def _guarded(self, key):
        await self.sem.acquire()
        data = await self._download(key)
        self.sem.release()
        return data

    async def fetch(self, key):
        try:
            return await asyncio.wait_for(self._guarded(key), timeout=1.0)
        except asyncio.TimeoutError:
            print(f"{key}: timed out, will retry later", flush=True)
            return None

    async def fetch_nowait(self, key):
        return await self._guarded(key)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    f = BlobFetcher.remote()
    first = ray.get([f.fetch.remote(f"blob-{i}") for i in range(8)])
    print("first batch:", first, flush=True)
    refs = [f.fetch_nowait.remote(f"blob-{i}") for i in range(8, 12)]
    print("READY: driver -> BlobFetcher.fetch_nowait x4 (both semaphore permits leaked)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
