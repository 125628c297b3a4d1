"""A rank waits in a torch.distributed store for a key its peer sets after four minutes of work (healthy).

Scenario: two gloo ranks (Ray actors) share a FileStore. Rank 0 computes (pure Python, CPU-busy,
silent) for four minutes, then sets `ckpt/0` and enters the barrier; rank 1 waits for `ckpt/0`
with `store.wait` (the same key), then the barrier. While rank 0 works, rank 1 sits in the C++
store wait (idle) and rank 0 runs.

Truth: not hung (the writer is working towards its `set`). Written by h-peers as the
counterfactual of the store-key rule: a store wait whose writer is busy is no hang.
"""
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.1)
class Rank:
    def __init__(self, rank: int, world: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        self.store = dist.FileStore(path, world)
        self.store.set_timeout(datetime.timedelta(hours=1))
        dist.init_process_group("gloo", store=self.store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def run_epoch(self, epoch: int, seconds: float) -> int:
        import torch.distributed as dist

        acc = 0
        if self.rank == 0:
            end = time.time() + seconds
            while time.time() < end:
                acc = sum(i * i for i in range(200_000)) % 97 + acc
            self.store.set(f"ckpt/{epoch}", str(acc))
        else:
            self.store.wait([f"ckpt/{epoch}"])
            acc = int(self.store.get(f"ckpt/{epoch}").decode())
        dist.barrier()
        return acc


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tmp = tempfile.mkdtemp(prefix="handoff_ok_")
    ranks = [Rank.remote(r, 2, os.path.join(tmp, "store")) for r in range(2)]
    refs = [r.run_epoch.remote(0, 240.0) for r in ranks]
    print("READY epoch 0", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
