"""Async lookups of a feature store await its warm-up; more lookups are queued; the driver marks it warm only after them.

Scenario: a scoring driver starts an async FeatureStore actor (max_concurrency=2) and submits six
`lookup` calls at once. `lookup` awaits `self.warm.wait()` (an asyncio.Event) until the store is
marked warm by `mark_warm()`. The driver was meant to mark it warm first, but its code gathers the
lookups (`ray.get(lookups)`) and only then calls `store.mark_warm.remote()`. Two lookups hold both
slots, awaiting; the other four are queued behind them - more of the same awaiting method, not a
setter.

Mechanism: the async twin of waiters_queued_behind_waiter. Every concurrency slot of the async
actor holds a coroutine suspended in await (no stack for py-spy); the queued calls would await the
Event too (none of them is `mark_warm`, the only method of the class that sets it). The one party
that would call the setter is the driver, on the line after a ray.get that waits on those very
lookups: a cycle through the driver's program order.
Expected diagnosis: hang, set-order-deadlock, culprit the driver (calls `mark_warm` only after its
`ray.get(lookups)`); the FeatureStore and its queued lookups are victims - not event-setter-queued
(no queued call sets the Event). Fix: call `store.mark_warm.remote()` before gathering the lookups.
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class FeatureStore:
    def __init__(self):
        self.warm = asyncio.Event()
        self.rows = {i: [i * 0.5, i * 0.25] for i in range(64)}

    async def lookup(self, ids: list) -> list:
        await self.warm.wait()
        return [self.rows.get(i) for i in ids]

    async def mark_warm(self) -> None:
        self.warm.set()

    async def size(self) -> int:
        return len(self.rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = FeatureStore.remote()
    print("rows:", ray.get(store.size.remote()), flush=True)
    lookups = [store.lookup.remote(list(range(i, i + 8))) for i in range(0, 48, 8)]
    print("READY: 2 lookups await FeatureStore.warm, 4 queued; driver marks warm after ray.get", flush=True)
    features = ray.get(lookups)
    store.mark_warm.remote()
    print(len(features))


if __name__ == "__main__":
    main()
