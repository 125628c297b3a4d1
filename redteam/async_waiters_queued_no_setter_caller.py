"""Async lookups await a feature store's warm-up that its loader task never marks; more lookups are queued.

Scenario: the async twin of waiters_queued_no_setter_caller. A scoring driver starts an async
FeatureStore actor (max_concurrency=2), runs a `load_rows` task that fills it
(`store.add.remote(rows)`) and returns, and submits six `lookup` calls. `lookup` awaits
`self.warm.wait()` (an asyncio.Event) until `mark_warm()` is called. The loader was meant to call
`store.mark_warm.remote()` when done; that line was lost in a refactor, and no other code of the job
calls it. Two lookups hold both slots, awaiting (coroutines: no stack); the other four are queued.

Mechanism: waiters queued, no caller of the setter. The queued calls are more of the same awaiting
`lookup` (they would await too); `mark_warm`, the only method of the class that sets the Event,
exists but is neither running, queued, nor called after its current line by any process of the job
(the loader task FINISHED; the driver only waits on the lookups).
Expected diagnosis: hang, async-await-stuck on FeatureStore (`await self.warm.wait()` in `lookup`):
nothing will set it - not event-setter-queued (no queued call sets it). Fix: have the loader call
`store.mark_warm.remote()` after its last `add` (or make lookup depend on the loader's ref).
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class FeatureStore:
    def __init__(self):
        self.warm = asyncio.Event()
        self.rows: dict = {}

    async def add(self, rows: dict) -> int:
        self.rows.update(rows)
        return len(self.rows)

    async def lookup(self, ids: list) -> list:
        await self.warm.wait()
        return [self.rows.get(i) for i in ids]

    async def mark_warm(self) -> None:
        self.warm.set()


@ray.remote(num_cpus=0.2)
def load_rows(store, start: int, count: int) -> int:
    rows = {i: [i * 0.5, i * 0.25] for i in range(start, start + count)}
    return ray.get(store.add.remote(rows))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = FeatureStore.remote()
    print("rows:", ray.get(load_rows.remote(store, 0, 64)), flush=True)
    lookups = [store.lookup.remote(list(range(i, i + 8))) for i in range(0, 48, 8)]
    print("READY: 2 lookups await FeatureStore.warm, 4 queued; nobody calls mark_warm", flush=True)
    features = ray.get(lookups)
    print(len(features))


if __name__ == "__main__":
    main()
