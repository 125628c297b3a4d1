"""Two gloo process groups over the same ranks, used in opposite orders by the two ranks: ABBA over communicators.

Scenario: a data-parallel trainer keeps gradients and metrics on separate process groups
(`grad_pg = dist.new_group([0, 1])`, `metric_pg = dist.new_group([0, 1])`, both created on both
ranks in the same order, so creation is fine). Each step rank 0 all-reduces the gradient on
`grad_pg` and then the loss on `metric_pg`. Rank 1 was changed to "log early": when it has a
loss to report (`self.log_early`) it all-reduces the loss on `metric_pg` first, then the
gradient on `grad_pg`. Each group is its own gloo context with its own pairs: rank 0 waits on
grad_pg for rank 1, rank 1 waits on metric_pg for rank 0 — neither ever arrives.

Mechanism: collective order mismatch across two process groups (same ranks, different
communicators): each rank blocks in a different group's all_reduce.
Truth: hang; culprit rank 1's reordered `dist.all_reduce(loss, group=self.metric_pg)` (line under
`if self.log_early:`), or the order mismatch naming both ranks (collective-mismatch); the driver
is a victim. Fix: issue collectives on all groups in the same order on every rank.
"""
import datetime
import os
import tempfile

import ray


@ray.remote(num_cpus=0.5)
class Trainer:
    def __init__(self, rank, path):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=2))
        self.grad_pg = dist.new_group([0, 1])
        self.metric_pg = dist.new_group([0, 1])
        self.rank = rank
        self.log_early = rank == 1

    def step(self, n):
        import torch
        import torch.distributed as dist

        for i in range(n):
            grad = torch.randn(1024)
            loss = torch.tensor([float(i)])
            if self.log_early:
                dist.all_reduce(loss, group=self.metric_pg)
                dist.all_reduce(grad, group=self.grad_pg)
            else:
                dist.all_reduce(grad, group=self.grad_pg)
                dist.all_reduce(loss, group=self.metric_pg)
        return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt12_2pg_"), "store")
    ranks = [Trainer.remote(r, path) for r in range(2)]
    ray.get([r.__ray_ready__.remote() for r in ranks])
    refs = [r.step.remote(5) for r in ranks]
    print("READY: driver -> Trainer.step x2 (grad_pg / metric_pg in opposite orders)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
