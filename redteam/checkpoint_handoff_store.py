"""A rank waits in a torch.distributed store for a key the writer spelled differently.

Scenario: two gloo ranks (Ray actors) share a FileStore. After each epoch rank 0 saves a
checkpoint and publishes its path in the store under `ckpt/<epoch>` (0-based), then enters
dist.barrier(). Rank 1 waits for the path with `store.wait(["ckpt/<epoch + 1>"])` (it counts
epochs from 1) before the barrier. The store timeout is an hour. Rank 1 sits in the C++ store
wait (GIL released, idle), rank 0 in barrier waiting for rank 1. No error, no log after epoch 0.

Mechanism: a store (rendezvous key/value) wait on a key nobody will set; the only writer is past
its write and waits in a collective on the waiter.
Truth: culprit rank 1's `store.wait` on `ckpt/1` (rank 0 set `ckpt/0`); rank 0 (in barrier) is a
victim, not a rank that skipped a collective. Fix: one helper builds the key for both ranks; give
store waits a short timeout.
"""
import datetime
import os
import tempfile

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

    def run_epoch(self, epoch: int, ckpt_dir: str) -> str:
        import torch
        import torch.distributed as dist

        t = torch.ones(1024) * (self.rank + 1)
        dist.all_reduce(t)
        if self.rank == 0:
            path = os.path.join(ckpt_dir, f"epoch{epoch}.pt")
            torch.save({"w": t}, path)
            self.store.set(f"ckpt/{epoch}", path)
        else:
            self.store.wait([f"ckpt/{epoch + 1}"])
            path = self.store.get(f"ckpt/{epoch + 1}").decode()
        print(f"rank {self.rank}: epoch {epoch} checkpoint {path}", flush=True)
        dist.barrier()
        return path


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tmp = tempfile.mkdtemp(prefix="handoff_")
    ranks = [Rank.remote(r, 2, os.path.join(tmp, "store")) for r in range(2)]
    refs = [r.run_epoch.remote(0, tmp) for r in ranks]
    print("READY epoch 0", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
