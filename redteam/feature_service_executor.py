"""Async feature service whose executor jobs wait on coroutines that need the same executor.

Scenario: an online feature service (async actor) serves get_features(keys). Row decoding is old
synchronous code, so it runs in the actor's 2-thread I/O executor via loop.run_in_executor. The
decoder needs the raw blob and reuses the async client from its worker thread with
asyncio.run_coroutine_threadsafe(self._fetch_blob(key), loop).result(). _fetch_blob in turn awaits
loop.run_in_executor(self.io_pool, ...) for the blocking read -- and both io_pool threads are busy
in the decoders waiting on those coroutines. The event loop itself is idle (the coroutines are
suspended on executor futures queued behind the decoders).

Mechanism: executor waiting on itself through the event loop (run_in_executor job ->
run_coroutine_threadsafe(...).result() -> coroutine awaiting run_in_executor on the same pool).
Truth: culprit FeatureService (its io_pool: both workers in Future.result() on coroutines that
await work queued in the same pool). Fix: a separate executor for the blocking read, or make the
decoder async.
"""
import asyncio
import concurrent.futures as cf
import hashlib
import os
import time

import ray


@ray.remote(num_cpus=0.1)
class FeatureService:
    def __init__(self):
        self.io_pool = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="feature-io")
        self.loop: asyncio.AbstractEventLoop | None = None

    def _read_blob(self, key: str) -> bytes:
        time.sleep(0.01)  # stands in for a blocking object-store read
        return hashlib.sha256(key.encode()).digest() * 8

    async def _fetch_blob(self, key: str) -> bytes:
        return await asyncio.get_running_loop().run_in_executor(self.io_pool, self._read_blob, key)

    def _decode_row(self, key: str) -> list[float]:
        assert self.loop is not None
        blob = asyncio.run_coroutine_threadsafe(self._fetch_blob(key), self.loop).result()
        return [b / 255 for b in blob[:16]]

    async def get_features(self, keys: list[str]) -> dict[str, list[float]]:
        self.loop = asyncio.get_running_loop()
        rows = await asyncio.gather(*(self.loop.run_in_executor(self.io_pool, self._decode_row, k) for k in keys))
        return dict(zip(keys, rows, strict=True))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    svc = FeatureService.remote()
    ref = svc.get_features.remote([f"user:{i}" for i in range(32)])
    print("READY requested features for 32 users", flush=True)
    print(len(ray.get(ref)))


if __name__ == "__main__":
    main()
