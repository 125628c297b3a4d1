"""A Ray Data UDF waits for a label vocabulary that the driver publishes only after it has the first batch.

Scenario: an eval pipeline tags text with label ids. `map_batches(LabelTagger, concurrency=1)`
looks every batch's labels up in a vocabulary held by a LabelStore actor
(`ray.get(store.vocab.remote())`; `vocab` is async and awaits an asyncio.Event until a vocabulary
was published). The driver was written to build the vocabulary "from what it sees": it iterates
`ds.iter_batches()` and publishes the vocabulary (`store.publish.remote(...)`) when it has the
first batch. The UDF needs the vocabulary to produce that first batch. The driver waits in
`iter_batches`; the UDF actor waits in `ray.get` on `LabelStore.vocab`; `vocab` awaits the event
only the driver's `publish` would set.

Mechanism: a wait cycle through Ray Data: consumer (driver, in iter_batches) -> the map
operator's UDF actor (ray.get) -> LabelStore.vocab (awaiting an Event) -> publish, which only the
consumer calls, after the batch it is waiting for.
Truth: culprit the driver (publishes the vocabulary after the first batch; the UDF needs it
before). Fix: publish the vocabulary before iterating (or build it in a separate pass).
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class LabelStore:
    def __init__(self):
        self.ready = asyncio.Event()
        self.labels: dict[str, int] = {}

    async def publish(self, labels: list[str]) -> int:
        self.labels = {w: i for i, w in enumerate(labels)}
        self.ready.set()
        return len(self.labels)

    async def vocab(self) -> dict[str, int]:
        await self.ready.wait()
        return self.labels


class LabelTagger:
    def __init__(self, store):
        self.store = store
        self.vocab: dict[str, int] | None = None

    def __call__(self, batch: dict) -> dict:
        if self.vocab is None:
            self.vocab = ray.get(self.store.vocab.remote())
        batch["label_id"] = [self.vocab.get(str(x % 7), -1) for x in batch["id"]]
        return batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = LabelStore.options(name="label-store").remote()
    ds = ray.data.range(2000).map_batches(LabelTagger, fn_constructor_args=(store,), concurrency=1,
                                          batch_size=200, num_cpus=0.5)
    print("READY tagging eval set", flush=True)
    seen = 0
    for i, batch in enumerate(ds.iter_batches(batch_size=200)):
        if i == 0:
            ray.get(store.publish.remote([str(k) for k in range(7)]))
        seen += len(batch["id"])
    print("tagged", seen)


if __name__ == "__main__":
    main()
