"""A healthy threaded actor that calls its own methods through its own handle and waits for them.

Scenario
    An ``Indexer`` actor (``max_concurrency=4``: a threaded actor) builds a search index shard by
    shard. ``build`` hands each shard to ``index_shard`` through the actor's own handle
    (``ray.get_runtime_context().current_actor``, kept from when shards went to a pool of
    indexers) and waits for it with ``ray.get``; ``index_shard`` reads its shard from a slow
    ``ShardStore`` actor (about 8 s a shard: "a remote disk") and hashes it. The driver waits in
    ``ray.get(build)``. The job ends successfully after a few minutes.

Mechanism
    Nothing is wrong. The actor has four threads: ``build`` holds one, and the self-call runs at
    once on another thread of the same process (RUNNING, the actor's own pid), itself waiting in
    ``ray.get`` for ``ShardStore.fetch``, which sleeps in the store's "disk read"; ``build``'s
    wait ends when they return. What shows it: the thread running ``index_shard`` waits on
    another actor (not on ``build``), shards keep reaching FINISHED, the driver log counts them.

What misleads
    ``build`` waits on an object created by a call on its own actor: on a default actor
    (``max_concurrency=1``) that call would be queued behind the wait forever — a one-actor
    cycle. Here it is not queued: it RUNS, in another thread, and nothing waits on ``build``'s
    thread. Both threads are idle in ``ray.get`` and no CPU is used: reading every self-call as a
    self-edge calls this healthy job hung.

Expected diagnosis
    ``no-hang`` (a shard finished in the window) or ``inconclusive`` (the chain followed through
    ``index_shard``'s thread to ShardStore, which sleeps once per call, in no loop) — never
    ``hang``, never a cycle of one actor.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "no-hang",
    "verdicts": ["no-hang", "inconclusive"],
    "pattern": None,
    "culprits": [],
    "ready": "shard 1 indexed",
    "notes": "healthy: Indexer (max_concurrency=4).build calls ray.get(self_handle.index_shard.remote(i)) "
    "for 40 shards; each runs in another thread of the actor and waits ~8 s for ShardStore.fetch.",
}

NUM_SHARDS = 40
READ_S = 8.0  # the store's "disk read" per shard


@ray.remote(num_cpus=0.1)
class ShardStore:
    def fetch(self, shard: int) -> bytes:
        time.sleep(READ_S)  # a slow remote disk
        return bytes((shard * 7 + i) % 256 for i in range(4096))


@ray.remote(num_cpus=0.1, max_concurrency=4)
class Indexer:
    def __init__(self, store):
        # Was: a pool of indexer actors; the indexer now lives in this actor.
        self.me = ray.get_runtime_context().current_actor
        self.store = store
        self.done = 0

    def index_shard(self, shard: int) -> int:
        blob = ray.get(self.store.fetch.remote(shard))
        digest = shard
        for byte in blob:
            digest = (digest * 1_000_003 + byte) & 0xFFFFFFFF
        self.done += 1
        return digest

    def build(self, num_shards: int) -> int:
        index = 0
        for shard in range(num_shards):
            t0 = time.monotonic()
            index ^= ray.get(self.me.index_shard.remote(shard))
            print(f"[indexer] shard {shard} indexed in {time.monotonic() - t0:.1f}s", flush=True)
        return index


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    indexer = Indexer.remote(ShardStore.remote())
    ref = indexer.build.remote(NUM_SHARDS)
    print("READY: Indexer.build waits for Indexer.index_shard (another thread of the same actor), "
          "which waits for ShardStore.fetch", flush=True)
    print(f"index digest {ray.get(ref):#x}", flush=True)


if __name__ == "__main__":
    main()
