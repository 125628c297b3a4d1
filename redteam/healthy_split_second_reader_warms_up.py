"""Healthy: streaming_split(2): reader 0 waits in the split's epoch barrier while reader 1 still builds its model (~3 min).

Scenario: two EvalWorker actors each get one split of `ds.streaming_split(2)`. Worker 0 starts
iterating at once; worker 1 first builds its scoring model (~3 minutes of silent numpy: a random
projection refined by power iterations) and only then iterates its split. Ray Data's split
coordinator starts an epoch only when both readers have asked for it (`start_epoch` is a barrier), so
worker 0 waits in the coordinator for minutes, and the coordinator logs that it is "blocked waiting
on other clients". Then both read and the job ends.

Mechanism (none: healthy): a split reader waiting in the epoch barrier for a sibling reader that is
working and will come.
Truth: no hang. A right diagnosis is no-hang or inconclusive naming worker 1's model build; a hang
(split-consumer-left, a consumer that never comes) is a false hang.
"""
# redteam-settle: 30
# redteam-ray-start: --object-store-memory=300000000 --resources='{"rt14_latesplit":1}'
import os
import time

import numpy as np
import ray


@ray.remote(num_cpus=0.1)
class EvalWorker:
    def __init__(self, rank: int, warmup_s: float):
        self.rank, self.warmup_s = rank, warmup_s

    def evaluate(self, shard) -> int:
        rng = np.random.default_rng(self.rank)
        proj = rng.standard_normal((384, 384))
        end = time.time() + self.warmup_s
        while time.time() < end:
            proj = np.linalg.qr(proj @ proj.T / 384.0)[0]
        print(f"READY rank {self.rank}: model built, reading its split", flush=True)
        n = 0
        for batch in shard.iter_batches(batch_size=100):
            n += len(batch["id"]) + int(proj[0, 0] * 0)
        return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(4_000, override_num_blocks=40).map_batches(lambda b: {"id": b["id"] * 2})
    splits = ds.streaming_split(2, equal=True)
    workers = [EvalWorker.remote(0, 0.0), EvalWorker.remote(1, 200.0)]
    refs = [w.evaluate.remote(s) for w, s in zip(workers, splits, strict=True)]
    print("evaluation started on 2 workers", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
