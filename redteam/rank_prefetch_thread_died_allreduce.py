"""Ray-Train-like: rank 1's data prefetch thread died on a corrupt shard; rank 1 waits on its queue, rank 0 in all_reduce.

Scenario: two training ranks (Ray actors, gloo). Each rank starts a background `prefetch` thread
that reads its shard's records and puts batches on a `queue.Queue(maxsize=8)`; the training loop
does `batch = self.batches.get()` (no timeout), a forward, then `dist.all_reduce` of the gradient.
Rank 1's shard has a corrupt record at index 5: the prefetch thread raises `ValueError` and ends
(one traceback from threading's excepthook in the worker log, nothing else). Rank 1's main thread
blocks in `self.batches.get()` forever; rank 0, having done the same steps, blocks in all_reduce
waiting for rank 1.

Mechanism: a queue get whose only producer thread died, one hop behind a collective: the waiting
rank (rank 0) is a victim of the rank that never arrives.
Truth: hang; culprit rank 1 — its dead prefetch thread (`raise ValueError` in `_prefetch`; the
visible wait is `self.batches.get()` in `train`); rank 0's all_reduce is a victim. Fix: propagate
the producer's exception through the queue (put a sentinel/the exception) or get with a timeout
and check the thread is alive.
"""
import datetime
import os
import queue
import tempfile
import threading

import ray


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank, path):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=2))
        self.rank = rank
        self.batches = queue.Queue(maxsize=8)
        self.corrupt_at = 5 if rank == 1 else None
        self.loader = threading.Thread(target=self._prefetch, name="prefetch", daemon=True)
        self.loader.start()

    def _prefetch(self):
        import torch

        for i in range(10_000):
            if i == self.corrupt_at:
                raise ValueError(f"shard-{self.rank}: bad record header at {i}")
            self.batches.put(torch.randn(64, 32))

    def train(self, steps):
        import torch
        import torch.distributed as dist

        w = torch.randn(32, 8)
        for _ in range(steps):
            batch = self.batches.get()
            grad = (batch @ w).sum(0)
            dist.all_reduce(grad)
        return steps


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt12_pref_"), "store")
    ranks = [Rank.remote(r, path) for r in range(2)]
    ray.get([r.__ray_ready__.remote() for r in ranks])
    refs = [r.train.remote(50) for r in ranks]
    print("READY: driver -> Rank.train x2 (rank 1's prefetch thread died)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
