"""One loader actor drains the shards of a streaming_split one after the other: shard 1 is never read while shard 0 is.

Scenario: an evaluation job wants two equal halves of a dataset (`streaming_split(2, equal=True)`)
"so that it can later run on two workers", but for now a single ShardEvaluator actor evaluates
both halves itself, in turn: `for i, shard in enumerate(splits): for batch in shard.iter_batches(...)`.
The split coordinator starts an epoch only when every split's consumer has asked for it
(`SplitCoordinator.start_epoch` is a barrier of all n splits), and even past it, shard 1's blocks would
pile up unread (blocks of 100 images, ~5 MB each, 300 MB object store) until back-pressure stops the
executor. Shard 0's iterator waits in the coordinator forever, shard 1's consumer never comes: it is
the same thread, waiting. No error, no log.

Mechanism: a streaming_split whose outputs are consumed sequentially by one thread: every split
must be iterated concurrently (Ray Data's documented contract), otherwise the unconsumed split's
back-pressure stalls the split being read.
Truth: hang; culprit the ShardEvaluator's sequential loop over the splits (`for i, shard in
enumerate(splits):`, `evaluate_all`), which is both the waiter and the reason split 1 has no
consumer. Fix: one consumer per split running concurrently (one actor or thread per shard), or no
streaming_split (iterate the dataset once). Ray Data's operators are victims.
"""
# redteam-settle: 30
# redteam-ray-start: --object-store-memory=300000000 --resources='{"rt14_split":1}'
import os

import numpy as np
import ray


@ray.remote(num_cpus=0.1)
class ShardEvaluator:
    def evaluate_all(self, splits) -> list[int]:
        counts = []
        for i, shard in enumerate(splits):
            n = 0
            print(f"READY evaluating shard {i}", flush=True)
            for batch in shard.iter_batches(batch_size=50):
                n += len(batch["id"])
            counts.append(n)
        return counts


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(40_000, override_num_blocks=400).map_batches(
        lambda b: {"id": b["id"], "pixels": np.ones((len(b["id"]), 64, 64, 3), dtype=np.float32)})
    splits = ds.streaming_split(2, equal=True)
    ev = ShardEvaluator.remote()
    print("evaluating 2 shards", flush=True)
    print(ray.get(ev.evaluate_all.remote(splits)))


if __name__ == "__main__":
    main()
