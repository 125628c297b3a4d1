"""A Ray Data normalizer UDF waits for statistics the driver publishes only after a task computed them from the same normalized data.

Scenario: feature normalization for training. A StatsStore actor (async) holds the feature
column's mean/std: `get()` awaits an asyncio.Event that `put(stats)` sets. Normalizer, an actor-pool
UDF (`map_batches(Normalizer, concurrency=1)`), fetches them in its constructor
(`ray.get(store.get.remote())`). The driver computes the statistics with a task,
`stats = ray.get(column_stats.remote(ds))`, then `store.put.remote(stats)`, then trains on
`ds.iter_batches()`. But it passes `ds` - the *normalized* dataset, built a line earlier - instead of
`raw`: `column_stats` iterates ds inside its task, which starts a Normalizer, whose constructor waits
on StatsStore.get, which waits for the put the driver makes only after column_stats returns. Nothing
fails; the task's Ray Data executor waits for its one MapWorker, still in its constructor.

Mechanism: a cycle through a dataset pipeline: a task iterates a dataset whose actor-pool UDF waits
(in its constructor, through an actor) for a value the driver publishes only after that task returns.
Truth: hang; culprit the driver's `column_stats.remote(ds)` (the statistics of the normalized dataset;
it publishes with `store.put` only after waiting on it), the Normalizer's constructor and StatsStore.get
waiting as designed. Fix: compute the statistics on the raw dataset (`column_stats.remote(raw)`).
"""
# redteam-ray-start: --resources='{"rt14_stats":1}'
import asyncio
import os

import numpy as np
import ray


@ray.remote(num_cpus=0)
class StatsStore:
    def __init__(self):
        self.ready = asyncio.Event()
        self.stats = (0.0, 1.0)

    async def put(self, stats) -> None:
        self.stats = stats
        self.ready.set()

    async def get(self):
        await self.ready.wait()
        return self.stats


class Normalizer:
    def __init__(self, store):
        self.mean, self.std = ray.get(store.get.remote())

    def __call__(self, batch: dict) -> dict:
        return {"x": (batch["x"] - self.mean) / self.std}


@ray.remote(num_cpus=1)
def column_stats(ds) -> tuple[float, float]:
    total, sq, n = 0.0, 0.0, 0
    for batch in ds.iter_batches(batch_size=256):
        total += float(batch["x"].sum())
        sq += float((batch["x"] ** 2).sum())
        n += len(batch["x"])
    mean = total / n
    return mean, (sq / n - mean * mean) ** 0.5


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    store = StatsStore.remote()
    raw = ray.data.range(20_000, override_num_blocks=20).map_batches(
        lambda b: {"x": b["id"].astype(np.float64) * 0.5 + 3.0})
    ds = raw.map_batches(Normalizer, fn_constructor_kwargs={"store": store}, concurrency=1, num_cpus=0.5)
    stats_ref = column_stats.remote(ds)  # BUG: the statistics of the normalized dataset, not of `raw`
    print("READY computing feature statistics", flush=True)
    stats = ray.get(stats_ref)
    ray.get(store.put.remote(stats))
    for n, batch in enumerate(ds.iter_batches(batch_size=256)):
        if n % 10 == 0:
            print(f"batch {n}: mean {batch['x'].mean():.3f}", flush=True)


if __name__ == "__main__":
    main()
