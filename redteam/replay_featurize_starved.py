"""Ray Data featurization that can never start: replay-shard actors created first hold every CPU.

Scenario: an offline-RL job first creates 4 ReplayShard actors (num_cpus=1 each, the default the
author copied from a tutorial) that load and hold transition buffers, then featurizes a dataset
with ds.map_batches(featurize, num_cpus=1) and iterates it in the driver. The cluster has 4 CPUs,
all reserved by the idle shards, so Ray Data cannot launch a single map task; iter_batches waits
forever (Ray Data logs a warning about cluster resources, at most).

Mechanism: a Ray Data pipeline starved of resources: its map tasks need CPU=1 and every CPU is
held by idle actors of the same job (ALIVE, no running call).
Truth: culprit the 4 ReplayShard actors (hold all 4 CPUs while idle); the Ray Data operator
MapBatches(featurize) and the driver are victims. Fix: ReplayShard num_cpus=0 (or a fraction),
or limit Ray Data's resources / size the cluster.
"""
import os

import numpy as np
import ray


@ray.remote(num_cpus=1)
class ReplayShard:
    def __init__(self, shard: int, capacity: int):
        rng = np.random.default_rng(shard)
        self.obs = rng.standard_normal((capacity, 16)).astype(np.float32)

    def sample(self, n: int) -> np.ndarray:
        return self.obs[np.random.default_rng().integers(0, len(self.obs), n)]


def featurize(batch: dict) -> dict:
    x = batch["id"].astype(np.float32)
    return {"id": batch["id"], "feat": np.stack([np.sin(x), np.cos(x), np.log1p(x)], axis=1)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    shards = [ReplayShard.remote(i, 50_000) for i in range(4)]
    ray.get([s.sample.remote(1) for s in shards])
    ds = ray.data.range(100_000, override_num_blocks=50).map_batches(featurize, num_cpus=1)
    print("READY featurizing transitions", flush=True)
    rows = 0
    for batch in ds.iter_batches(batch_size=1024):
        rows += len(batch["id"])
    print("rows", rows)


if __name__ == "__main__":
    main()
