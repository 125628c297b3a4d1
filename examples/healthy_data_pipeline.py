"""A healthy Ray Data pipeline: a slow actor-pool UDF feeds a trainer; nothing is hung.

Scenario
    A ``Trainer`` actor reads ``range -> map_batches(SlowFeaturizer, concurrency=2)`` with
    ``iter_batches`` and "trains" on each batch. The UDF is slow (about 0.3 s a batch), so the
    trainer spends nearly all its time waiting inside Ray Data's iterator for the next block.

Mechanism
    Nothing is stuck: the operator's actors finish a batch every fraction of a second, the
    dataset's operator counters advance, and the trainer gets its batches. A sample of the
    trainer almost always lands in the iterator's wait, and the UDF actors are caught between or
    inside batches.

What misleads
    Every stack sample of the trainer shows the same wait inside ``iter_batches``; the UDF actors
    sleep in their batch; Ray Data's helper actors answer calls on a timer. Two samples a second
    apart look like a wait that does not move.

Expected diagnosis
    ``no-hang``: the dataset's operator progress (read twice from the dashboard's Ray Data
    endpoint) and the operator's finished calls show the pipeline moving.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "no-hang",
    "pattern": None,
    "culprits": [],
    "ready_timeout_s": 300,
    "notes": "a slow but healthy actor-pool UDF; the trainer waits in iter_batches between batches.",
}


class SlowFeaturizer:
    def __call__(self, batch: dict) -> dict:
        time.sleep(0.3)
        return {"id": batch["id"], "bucket": batch["id"] % 97}


@ray.remote(num_cpus=0.5)
class Trainer:
    def train(self, ds) -> int:
        rows = 0
        for epoch in range(1000):
            for batch in ds.iter_batches(batch_size=64):
                if rows == 0:
                    print("READY: the trainer got its first batch", flush=True)
                rows += len(batch["id"])
            print(f"epoch {epoch} done, {rows} rows", flush=True)
        return rows


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(100_000, override_num_blocks=400).map_batches(
        SlowFeaturizer, batch_size=64, concurrency=2, num_cpus=0.5)
    trainer = Trainer.remote()
    ref = trainer.train.remote(ds)
    print("the trainer reads the featurized dataset", flush=True)
    print(ray.get(ref), flush=True)


if __name__ == "__main__":
    main()
