"""Shard cache actor that deadlocks on its own lock: an evicted entry's ``__del__`` takes it again.

Scenario
    A ``ShardCache`` actor keeps the most recently used decoded training shards in memory (an
    LRU of ``capacity`` shards) so that several epochs over the same shards skip decoding. Every
    cached shard is a ``CachedShard`` that accounts for its memory: it adds its size to the
    cache's ``bytes_in_use`` when created and subtracts it in ``__del__``, under the cache's
    ``threading.Lock`` (the cache is also read by a metrics thread, hence the lock). The
    ``Trainer`` actor reads shards through the cache, one per step.

Mechanism
    ``ShardCache.put`` holds ``self._lock`` while it inserts the new shard and evicts the
    oldest one (``self._entries.popitem(last=False)``). The evicted ``CachedShard`` loses its
    last reference right there, so CPython runs its ``__del__`` immediately, on the same thread,
    while ``put`` still holds the lock; ``__del__`` does ``with self._cache._lock:`` and waits
    forever for a lock its own thread holds (``threading.Lock`` is not reentrant). It happens at
    the first eviction (shard ``capacity``, i.e. step 4). The cache's method never returns, the
    trainer waits in ``ray.get`` on it, the driver on the trainer. No error, nothing pending.

What misleads
    The ShardCache's only job thread waits at a ``with ...lock:`` line, which suggests another
    thread holds the lock (a metrics thread, a second caller). Wrong: no other thread runs job
    code; the same thread took the lock in ``put`` and re-enters it from
    ``CachedShard.__del__``, run by the eviction - ``threading.Lock`` is not reentrant.

Expected diagnosis
    ``lock-self-deadlock``: the ShardCache's only job thread is idle in ``CachedShard.__del__`` at
    ``with self._cache._lock:``, called from ``ShardCache.put`` (inside its ``with self._lock:``
    block); no other thread of the process runs job code, so the lock's holder is that same
    thread. Culprit: ShardCache. Trainer.fit waits in ray.get on ``ShardCache.get``; the driver
    waits on Trainer.fit.
"""

import os
import random
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "lock-self-deadlock",
    "culprits": [{"class_name": "ShardCache", "rank": None}],
    "notes": "ShardCache.put evicts the oldest CachedShard while holding self._lock; the evicted "
    "object's __del__ runs at once on the same thread and does `with self._cache._lock:` "
    "(threading.Lock, not reentrant): self-deadlock at the first eviction (step 4). Trainer.fit "
    "in ray.get on ShardCache.get; driver on Trainer.fit.",
}


@dataclass
class CacheConfig:
    capacity: int = 4  # shards kept decoded in memory
    num_shards: int = 16
    shard_records: int = 256
    num_steps: int = 12
    lr: float = 0.05
    seed: int = 0


class CachedShard:
    def __init__(self, cache: "ShardCacheImpl", shard_id: int, records: list):
        self._cache = cache
        self.shard_id = shard_id
        self.records = records
        self.nbytes = 8 * len(records) * len(records[0])
        with cache._lock:
            cache.bytes_in_use += self.nbytes

    def __del__(self):
        with self._cache._lock:
            self._cache.bytes_in_use -= self.nbytes


class ShardCacheImpl:
    def __init__(self, cfg: CacheConfig):
        self.cfg = cfg
        self._lock = threading.Lock()
        self._entries: OrderedDict[int, CachedShard] = OrderedDict()
        self.bytes_in_use = 0
        self.hits = self.misses = 0

    def _decode(self, shard_id: int) -> list:
        rng = random.Random(self.cfg.seed * 65537 + shard_id)
        return [[rng.uniform(-1, 1) for _ in range(4)] for _ in range(self.cfg.shard_records)]

    def put(self, shard_id: int, records: list) -> CachedShard:
        entry = CachedShard(self, shard_id, records)
        with self._lock:
            self._entries[shard_id] = entry
            while len(self._entries) > self.cfg.capacity:
                self._entries.popitem(last=False)  # evict the least recently used shard
        return entry

    def get(self, shard_id: int) -> list:
        with self._lock:
            entry = self._entries.get(shard_id)
            if entry is not None:
                self._entries.move_to_end(shard_id)
                self.hits += 1
                return entry.records
            self.misses += 1
        return self.put(shard_id, self._decode(shard_id)).records

    def stats(self) -> dict:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self.bytes_in_use,
                    "hits": self.hits, "misses": self.misses}


@ray.remote(num_cpus=0.25)
class ShardCache:
    def __init__(self, cfg: dict):
        self.impl = ShardCacheImpl(CacheConfig(**cfg))

    def get(self, shard_id: int) -> list:
        return self.impl.get(shard_id)

    def stats(self) -> dict:
        return self.impl.stats()


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, cache, cfg: dict):
        self.cfg = CacheConfig(**cfg)
        self.cache = cache
        self.w = [0.0] * 4

    def fit(self) -> list:
        order = list(range(self.cfg.num_shards))
        random.Random(self.cfg.seed).shuffle(order)
        for step in range(self.cfg.num_steps):
            records = ray.get(self.cache.get.remote(order[step % len(order)]))
            grad = [0.0] * 4
            for x in records:
                err = sum(wi * xi for wi, xi in zip(self.w, x)) - sum(x)
                for j in range(4):
                    grad[j] += 2 * err * x[j] / len(records)
            self.w = [wi - self.cfg.lr * g for wi, g in zip(self.w, grad)]
            print(f"[trainer] step {step}: shard {order[step % len(order)]}", flush=True)
        return self.w


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = CacheConfig()
    cache = ShardCache.remote(asdict(cfg))
    trainer = Trainer.remote(cache, asdict(cfg))
    print(f"cache: {ray.get(cache.stats.remote())}", flush=True)
    print("READY: Trainer.fit -> ShardCache.get (LRU evicts from shard 4 on)", flush=True)
    print(f"weights: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
