"""A data prefetcher actor waits for a shard that its background thread died fetching.

Scenario
    A ``ShardPrefetcher`` actor keeps the next training shard ready: a background thread
    downloads and decodes it and sets a ``threading.Event``; ``next_shard()`` waits on that
    event and hands the shard to the ``Trainer``.

Mechanism
    Shard 3's manifest lacks the ``"num_rows"`` field (an older writer). The prefetch thread
    raises ``KeyError: 'num_rows'`` and dies before ``set()``; Python prints its traceback to
    the worker's stderr and nothing else notices. ``next_shard()`` for shard 3 waits on the
    event forever; the actor stays ALIVE; the Trainer waits in ``ray.get``, the driver on the
    Trainer. py-spy shows one thread in ``Event.wait`` and no other thread of the actor in job
    code.

What misleads
    The ShardPrefetcher is ALIVE, no task FAILED, and ``Event.wait`` suggests the download is
    just slow. Wrong: no other thread of the actor runs job code - the prefetch thread died on
    ``KeyError: 'num_rows'`` before ``set()``, and its traceback is only in the worker's
    ``.err`` log.

Expected diagnosis
    ``event-never-set``: ShardPrefetcher waits in ``Event.wait`` inside ``next_shard``, no other
    thread runs job code and no call to it is queued; the dead thread's ``KeyError: 'num_rows'``
    is quoted from the actor's own log. Chain: driver → Trainer → ShardPrefetcher.
"""

import os
import threading

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "event-never-set",
    "culprits": [{"class_name": "ShardPrefetcher", "rank": None}],
    "notes": "the prefetch thread raised KeyError('num_rows') on shard 3 and died before "
    "Event.set(); next_shard waits on the event forever.",
}

MANIFESTS = {i: {"shard": i, "num_rows": 1000, "path": f"/data/train/shard-{i:05d}.bin"} for i in range(6)}
del MANIFESTS[3]["num_rows"]  # written by the old exporter


@ray.remote(num_cpus=0.25)
class ShardPrefetcher:
    def __init__(self):
        self.ready: dict[int, threading.Event] = {}
        self.shards: dict[int, list] = {}

    def _fetch(self, shard: int) -> None:
        manifest = MANIFESTS[shard]
        rows = manifest["num_rows"]
        self.shards[shard] = [shard] * min(rows, 8)
        self.ready[shard].set()

    def prefetch(self, shard: int) -> None:
        self.ready[shard] = threading.Event()
        threading.Thread(target=self._fetch, args=(shard,), name=f"prefetch-{shard}", daemon=True).start()

    def next_shard(self, shard: int) -> list:
        if shard not in self.ready:
            self.prefetch(shard)
        self.ready[shard].wait()
        self.prefetch(shard + 1)
        return self.shards.pop(shard)


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, prefetcher):
        self.prefetcher = prefetcher

    def train(self, num_shards: int) -> int:
        seen = 0
        for shard in range(num_shards):
            batch = ray.get(self.prefetcher.next_shard.remote(shard))
            seen += len(batch)
            print(f"trained on shard {shard}", flush=True)
        return seen


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    prefetcher = ShardPrefetcher.remote()
    trainer = Trainer.remote(prefetcher)
    print("READY: training over 6 shards", flush=True)
    print(f"rows seen: {ray.get(trainer.train.remote(6))}", flush=True)


if __name__ == "__main__":
    main()
