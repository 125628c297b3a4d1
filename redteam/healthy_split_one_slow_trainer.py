"""Healthy: streaming_split(2): one trainer computes ~12 s per batch, the other waits in its split iterator.

Scenario: two TrainWorker actors consume `ds.streaming_split(2, equal=True)` (blocks of 100 images,
~5 MB each; 300 MB object store). Worker 0's step is trivial; worker 1 runs a silent numpy "training
step" of ~12 s per batch (a model too big for its share of the node). Worker 0 soon has consumed
what the coordinator can give it while worker 1's output buffer is full: the executor is
back-pressured and worker 0 waits in its split iterator (SplitCoordinator.get) for minutes at a
time. Worker 1 pulls a batch every ~12 s, so the pipeline moves slowly; it ends after ~10 minutes.

Mechanism (none: healthy): a streaming_split consumer waiting on a slow but working sibling consumer.
Truth: no hang. A right diagnosis is no-hang or inconclusive naming worker 1's computation; a hang
(split consumer stopped, back-pressure) is a false hang.
"""
# redteam-settle: 30
# redteam-ray-start: --object-store-memory=300000000 --resources='{"rt14_slowsplit":1}'
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=0.1)
class TrainWorker:
    def __init__(self, rank: int, step_s: float):
        self.rank, self.step_s = rank, step_s

    def train_epoch(self, shard) -> int:
        steps = 0
        w = np.random.default_rng(self.rank).standard_normal((256, 256))
        for batch in shard.iter_batches(batch_size=100):
            end = time.time() + self.step_s
            while time.time() < end:
                w = np.tanh(w @ w.T / 256.0) + batch["pixels"].mean() * 1e-6
            steps += 1
            if steps == 3:
                print(f"READY rank {self.rank}: training, step {steps}", flush=True)
        return steps


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(10_000, override_num_blocks=100).map_batches(
        lambda b: {"id": b["id"], "pixels": np.ones((len(b["id"]), 64, 64, 3), dtype=np.float32)})
    splits = ds.streaming_split(2, equal=True)
    workers = [TrainWorker.remote(0, 0.0), TrainWorker.remote(1, 12.0)]
    refs = [w.train_epoch.remote(s) for w, s in zip(workers, splits, strict=True)]
    print("epoch started on 2 workers", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
