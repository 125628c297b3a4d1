"""A torch DataLoader's forked worker processes call ray.get on an actor handle: the Ray client in a fork child never answers.

Scenario: a Trainer actor iterates a torch DataLoader (num_workers=2, default "fork" start
method on Linux). The Dataset's `__getitem__` fetches each sample's text from a ShardStore actor
with `ray.get(self.store.fetch.remote(i))`. Ray's core worker (its gRPC channels and io threads)
is not fork-safe: in the forked DataLoader workers those threads do not exist, and the call never
gets to ShardStore (no ShardStore.fetch task is ever submitted/finished). The workers sit in Ray's
ray.get/submit path; the Trainer's main thread waits in the DataLoader's `_get_data` (a
multiprocessing queue get with timeout, looping) for a batch. The driver waits in ray.get.

Mechanism: using the Ray API in a process forked from a Ray worker (threads of the core worker
are not copied by fork), inside DataLoader worker processes.
Truth: culprit ShardDataset.__getitem__'s ray.get in the DataLoader workers (children of the
Trainer); the Trainer's DataLoader wait is its victim. Fix: fetch the shard in the Trainer (or
in `__init__` before the workers fork) and pass plain data to the Dataset; or num_workers=0; or
multiprocessing_context="spawn" with no Ray calls in workers.
"""
# redteam-settle: 45
import os

import ray


@ray.remote(num_cpus=0.25)
class ShardStore:
    def fetch(self, i):
        return f"sample text number {i} " * 8


@ray.remote(num_cpus=0.5)
class Trainer:
    def __init__(self, store):
        self.store = store

    def epoch(self):
        import torch
        from torch.utils.data import DataLoader, Dataset

        store = self.store

        class ShardDataset(Dataset):
            def __len__(self):
                return 64

            def __getitem__(self, i):
                text = ray.get(store.fetch.remote(i))
                return torch.tensor([len(text), i], dtype=torch.float32)

        loader = DataLoader(ShardDataset(), batch_size=8, num_workers=2)
        total = 0.0
        for batch in loader:
            total += float(batch.sum())
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = ShardStore.remote()
    ray.get(store.fetch.remote(0))
    tr = Trainer.remote(store)
    ref = tr.epoch.remote()
    print("READY: driver -> Trainer.epoch (DataLoader workers call ray.get on ShardStore)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
