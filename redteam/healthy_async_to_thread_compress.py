"""Healthy: an async actor awaits asyncio.to_thread(pack) while the worker thread LZMA-compresses for minutes.

Scenario: CheckpointPacker (an async actor) packs a checkpoint before upload. The compression is
synchronous, so `pack` awaits `asyncio.to_thread(self._compress_all, shards)`: the event loop stays
free, one thread of the loop's default executor runs lzma.compress over 50 shards of 4 MB (~3-10 s
each, in C, with the GIL released), logging nothing until the end.
Mechanism: the actor's event loop thread is idle in its selector; the `pack` coroutine is suspended
at `await` on the executor's future; the default-executor thread (`asyncio_0`) is busy in
`lzma.compress` (CPU ~100 %, a native frame, a static Python stack), and finishes. Driver in ray.get.
Truth: healthy (no culprit): pack returns after ~3-6 minutes. An "await never resolves" hang is
wrong: the awaited future is the executor thread's job, which is running.
"""
import asyncio
import lzma
import os
import random
import time

import ray


@ray.remote(num_cpus=1)
class CheckpointPacker:
    def _compress_all(self, n_shards):
        r = random.Random(1)  # noqa: S311 - test data, not crypto
        shard = bytes(r.getrandbits(8) if i % 3 == 0 else 65 for i in range(4_000_000))
        total = 0
        for _ in range(n_shards):
            total += len(lzma.compress(shard, preset=6))
        return total

    async def pack(self, n_shards):
        t0 = time.time()
        size = await asyncio.to_thread(self._compress_all, n_shards)
        print(f"packed {n_shards} shards into {size} bytes in {time.time() - t0:.0f} s", flush=True)
        return size


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    packer = CheckpointPacker.remote()
    ref = packer.pack.remote(50)
    print("READY: driver -> CheckpointPacker.pack (awaits asyncio.to_thread: lzma in the executor thread)",
          flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
