"""Healthy: rank 0 waits in a gloo all_reduce while rank 1 is still computing its (bigger) shard.

Scenario: two Ray actor ranks (gloo) each compute a local statistic over their shard and
all_reduce it. Rank 1's shard is much larger (skewed partitioning): it spends ~5 minutes in torch
matmuls (a loop of 1024x1024 products, CPU-bound) before it reaches the all_reduce. Rank 0 reaches
the all_reduce within a second and waits there for ~5 minutes; then both finish.

Mechanism: none — a straggler rank still computing (busy on CPU, its stack changing between
dumps inside `local_stat`), not a collective mismatch.
Truth: no hang (slow, skewed shard). A right diagnosis is no-hang or inconclusive naming rank 1 busy.
"""
# redteam-settle: 25
import datetime
import os
import socket
import time

import ray


@ray.remote(num_cpus=0.5)
class Rank:
    def run(self, rank, world, port, seconds):
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(hours=1))
        stat = self.local_stat(seconds)
        dist.all_reduce(stat)
        return float(stat.sum())

    def local_stat(self, seconds):
        import torch
        a = torch.randn(512, 512)
        acc = torch.zeros(512, 512)
        end = time.time() + seconds
        while time.time() < end:
            acc += (a @ a).tanh()
        return acc.mean(dim=0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = free_port()
    ranks = [Rank.remote() for _ in range(2)]
    refs = [r.run.remote(i, 2, port, 1 if i == 0 else 300) for i, r in enumerate(ranks)]
    print("READY: rank 0 in all_reduce; rank 1 computing its large shard for ~5 min", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
