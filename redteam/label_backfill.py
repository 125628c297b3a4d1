"""Ray Data: a UDF actor waits on a named actor that waits for the dataset's own output.

Scenario: a label backfill. `ds.map_batches(Labeler, concurrency=1)`; Labeler's `__call__` fetches
the label map from the named actor `label-registry` with `ray.get(self.registry.label_map.remote())`.
The registry (async actor) publishes the label map only once it has "seen enough rows":
`label_map` awaits `self._enough.wait()`, an asyncio.Event set by `record(n)` when the count
reaches 64. The driver calls `registry.record.remote(len(batch))` for each batch it takes from
`ds.iter_batches(batch_size=32)`.

Mechanism: the driver waits in iter_batches for the first labelled batch; Labeler waits on the
registry; the registry waits for records the driver sends only per labelled batch: a cycle
driver -> Labeler -> label-registry -> driver.
Truth: hang. Culprit: the registry's wait for output that depends on itself: `label_map`'s
`await self._enough.wait()`, reached from Labeler's `ray.get(self.registry.label_map.remote())`;
the setter is the driver's `registry.record.remote(...)` after each batch. Fix: build the label map
from the source (not from the labelled output), or record rows before the UDF needs the map.
"""
# redteam-ray-start: --resources='{"rt15c_lb":1}'
import asyncio
import os

import numpy as np
import ray


@ray.remote(num_cpus=0.1)
class LabelRegistry:
    def __init__(self):
        self._rows = 0
        self._enough = asyncio.Event()

    async def record(self, n):
        self._rows += n
        if self._rows >= 64:
            self._enough.set()

    async def label_map(self):
        await self._enough.wait()
        return {i: f"class-{i}" for i in range(10)}


class Labeler:
    def __init__(self):
        self.registry = ray.get_actor("label-registry")

    def __call__(self, batch):
        labels = ray.get(self.registry.label_map.remote())
        batch["label"] = np.array([labels[int(x) % 10] for x in batch["id"]])
        return batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    registry = LabelRegistry.options(name="label-registry").remote()
    ray.get(registry.__ray_ready__.remote())
    ds = ray.data.range(512).map_batches(Labeler, concurrency=1, batch_size=32, num_cpus=0.5)
    print("READY backfilling labels", flush=True)
    n = 0
    for batch in ds.iter_batches(batch_size=32):
        ray.get(registry.record.remote(len(batch["id"])))
        n += len(batch["id"])
    print("labelled", n)


if __name__ == "__main__":
    main()
