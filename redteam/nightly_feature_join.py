"""Healthy: rank 0 waits in all_reduce; rank 1 waits for a side-table task queued behind a compaction on the only disk slot.

Scenario: two gloo ranks (Ray actors). Before the step's all_reduce, rank 1 joins a side table:
`ray.get(load_side_table.remote(...))`, a task that needs the cluster's one `rt15_disk` (a local
scratch-disk slot). The driver started `compact` (resources={"rt15_disk": 1}, ~3.5 min of numpy)
first; load_side_table is pending behind it. Rank 0 waits in `dist.all_reduce` for rank 1. When
compact returns, load_side_table runs (seconds), rank 1 reaches all_reduce and both finish.

Mechanism (none: healthy): a collective's slow rank waits on a pending task whose resource is held
by a running, CPU-busy task that ends.
Truth: no hang; no-hang or inconclusive is right; a hang is a false hang.
"""
# redteam-ray-start: --resources='{"rt15_disk":1}'
import datetime
import os
import tempfile
import time

import numpy as np
import ray


@ray.remote(num_cpus=1, resources={"rt15_disk": 1})
def compact(seconds: float) -> int:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((256, 256))
    end, n = time.time() + seconds, 0
    while time.time() < end:
        a = np.tanh(a @ a / 256.0)
        n += 1
    return n


@ray.remote(num_cpus=1, resources={"rt15_disk": 1})
def load_side_table(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        self.rank = rank
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))

    def ready(self) -> int:
        return self.rank

    def step(self) -> float:
        import torch
        import torch.distributed as dist

        x = torch.ones(1024)
        if self.rank == 1:
            side = ray.get(load_side_table.remote(1024))
            x += torch.from_numpy(side)
        dist.all_reduce(x)
        return float(x[0])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    comp = compact.remote(210)
    path = os.path.join(tempfile.mkdtemp(prefix="rt15_join_"), "store")
    ranks = [Rank.remote(r, path) for r in range(2)]
    ray.get([r.ready.remote() for r in ranks])
    refs = [r.step.remote() for r in ranks]
    time.sleep(6)
    print("READY ranks stepping", flush=True)
    print(ray.get(comp), ray.get(refs))


if __name__ == "__main__":
    main()
