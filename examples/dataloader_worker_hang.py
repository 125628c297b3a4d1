"""Language-model pre-training actor whose DataLoader workers inherited a locked lock through fork.

Scenario
    A ``Trainer`` actor trains a tiny bigram model on tokenized shards with a standard
    ``torch.utils.data.DataLoader(num_workers=2)``. The ``ShardDataset`` resolves sample indices
    to shard files through an index that is listed from object storage in a background thread
    when the dataset is built (listing a large bucket is slow). Until the listing is done the
    index lock is held, so ``__getitem__`` simply waits at ``with self._index_lock:`` — a
    readiness gate that works fine in a single process.

Mechanism
    The DataLoader starts its worker processes with ``fork`` (the Linux default) as soon as the
    first epoch is iterated, which is immediately after the dataset is built, while the listing
    thread still holds ``_index_lock``. ``fork`` copies the lock in its locked state but not the
    thread that would release it. In the parent the listing finishes and releases its copy; in
    each worker the copy stays locked forever, so both workers block in ``__getitem__`` at
    ``with self._index_lock:``. The parent waits in ``_MultiProcessingDataLoaderIter._next_data``
    for a batch that never arrives (``timeout=0``: no DataLoader timeout). The workers are alive,
    so the DataLoader's own liveness check never fires.

What misleads
    The Trainer waits in the DataLoader, which reads as slow I/O or a too-small ``num_workers``,
    and the children show the same title as the actor. Wrong: each forked worker is idle at
    ``with self._index_lock:`` with no other thread in it - fork copied a lock held by a thread
    that does not exist in the child.

Expected diagnosis
    ``child-process-hang``: Trainer.fit waits in the DataLoader (``_next_data`` /
    ``_try_get_data``, torch/utils/data/dataloader.py) for its worker children; each child (a
    forked copy of the actor, same title) is idle at ``ShardDataset.__getitem__`` ``with
    self._index_lock:`` with no other thread in the child that could hold the lock (a lock copied
    locked by fork). Culprit: the Trainer's DataLoader worker children. The driver waits in
    ray.get on Trainer.fit.
"""

import os
import threading
import time
from dataclasses import asdict, dataclass

import ray
import torch
from torch.utils.data import DataLoader, Dataset

EXPECTED = {
    "verdict": "hang",
    "pattern": "child-process-hang",
    "culprits": [{"class_name": "Trainer", "rank": None}],
    "notes": "ShardDataset holds _index_lock while a background thread lists the shards "
    "(~3 s); DataLoader(num_workers=2) forks its workers at once, copying the lock locked; "
    "both workers block at `with self._index_lock:` in __getitem__ forever; Trainer.fit waits in "
    "_MultiProcessingDataLoaderIter for them; driver in ray.get on Trainer.fit.",
}


@dataclass
class PretrainConfig:
    bucket: str = "s3://corpus/tokenized/v3"
    num_shards: int = 64
    samples: int = 4096
    seq_len: int = 32
    vocab: int = 256
    batch_size: int = 32
    num_workers: int = 2
    listing_seconds: float = 3.0
    epochs: int = 1
    lr: float = 0.1


class ShardDataset(Dataset):
    def __init__(self, cfg: PretrainConfig):
        self.cfg = cfg
        self._index: list = []
        self._index_lock = threading.Lock()
        self._index_lock.acquire()  # released once the shard listing is in place
        threading.Thread(target=self._list_shards, name="shard-lister", daemon=True).start()

    def _list_shards(self) -> None:
        try:
            time.sleep(self.cfg.listing_seconds)  # stands in for paging through the bucket listing
            self._index = [f"{self.cfg.bucket}/shard-{i:05d}.bin" for i in range(self.cfg.num_shards)]
        finally:
            self._index_lock.release()

    def __len__(self) -> int:
        return self.cfg.samples

    def __getitem__(self, idx: int):
        with self._index_lock:
            shard = self._index[idx % len(self._index)]
        g = torch.Generator().manual_seed(hash((shard, idx)) % (2**31))
        tokens = torch.randint(0, self.cfg.vocab, (self.cfg.seq_len + 1,), generator=g)
        return tokens[:-1], tokens[1:]


@ray.remote(num_cpus=0.5)
class Trainer:
    def __init__(self, cfg: dict):
        self.cfg = PretrainConfig(**cfg)
        torch.set_num_threads(1)
        self.model = torch.nn.Embedding(self.cfg.vocab, self.cfg.vocab)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=self.cfg.lr)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def fit(self) -> float:
        dataset = ShardDataset(self.cfg)
        loader = DataLoader(dataset, batch_size=self.cfg.batch_size, shuffle=True,
                            num_workers=self.cfg.num_workers)
        loss = torch.tensor(float("nan"))
        for epoch in range(self.cfg.epochs):
            for step, (x, y) in enumerate(loader):
                logits = self.model(x)
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, self.cfg.vocab), y.reshape(-1))
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                if step % 20 == 0:
                    print(f"[trainer] epoch {epoch} step {step} loss {loss.item():.3f}", flush=True)
        return loss.item()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = PretrainConfig()
    trainer = Trainer.remote(asdict(cfg))
    print(f"model: {ray.get(trainer.num_parameters.remote())} parameters", flush=True)
    print("READY: Trainer.fit -> DataLoader(num_workers=2) -> ShardDataset.__getitem__", flush=True)
    print(f"final loss: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
