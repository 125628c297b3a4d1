"""Data-parallel training (torch.distributed, gloo) where one rank skips a gradient all_reduce.

Scenario
    Four ``TrainWorker`` actors, one per torch rank, train a small regression model with
    hand-rolled data parallelism: each step every rank computes gradients on its own shard,
    flattens them into one bucket and ``dist.all_reduce``\\ s it (what DDP does internally).
    The data loader drops malformed records; ``skip_empty_batches=True`` makes a rank skip a
    step whose batch came back empty instead of crashing.

Mechanism
    Rank 2's shard for step 3 is ``part-00014``, a zero-length file, so its batch is empty and
    rank 2 ``continue``\\ s past the ``all_reduce`` of step 3 (it prints
    ``WARNING rank 2: empty batch at step 3, skipping``). gloo matches collectives by call order,
    not by step: rank 2's all_reduce of step 4 pairs with the others' step 3, its step 5 with
    their step 4, and rank 2 finishes ``train()`` one collective early (its task FINISHED, the
    actor idle but ALIVE). Ranks 0, 1 and 3 wait forever in the all_reduce of step 5 for a rank
    that will never join. No error anywhere; the tensors had equal shapes so nothing mismatched.
    ``collective_timeout_hours`` is set high (as people do for slow checkpoints), so it never
    times out in practice.

What misleads
    Three ranks sit in the same ``all_reduce``; restarting, blaming the network or NCCL/gloo
    settings is tempting. Wrong: the culprit is the rank that is *not* there - its task FINISHED
    without an error, one collective early, because gloo pairs collectives by call order; its
    branch that skips a step is the bug.

Expected diagnosis
    ``collective-skipped``: ranks 0, 1, 3 in ``all_reduce`` (torch/distributed/distributed_c10d.py)
    at the same source line of ``TrainWorker.train``; rank 2 is not in any collective: its
    ``train`` task FINISHED and its process is idle in the worker main loop. Culprit: the
    TrainWorker with rank 2 (its log shows the skip warning). The driver waits in ray.get on the
    three unfinished ``train`` tasks.
"""

import datetime
import os
import time
from dataclasses import asdict, dataclass

import ray
import torch
import torch.distributed as dist

EXPECTED = {
    "verdict": "hang",
    "pattern": "collective-skipped",
    "culprits": [{"class_name": "TrainWorker", "rank": 2}],
    "notes": "rank 2 skips the all_reduce of step 3 (empty batch from zero-length part-00014, "
    "skip_empty_batches=True); gloo pairs by call order so rank 2 finishes train() one "
    "collective early (task FINISHED, actor idle) while ranks 0,1,3 hang in all_reduce of "
    "step 5. No error.",
}

# Parts of the training set that are zero-length on the shared filesystem (a failed upload).
EMPTY_PARTS = {"part-00014"}


@dataclass
class TrainConfig:
    world_size: int = 4
    num_steps: int = 6
    batch_size: int = 16
    in_features: int = 8
    lr: float = 0.05
    skip_empty_batches: bool = True
    collective_timeout_hours: float = 24.0
    seed: int = 0


class ShardedLoader:
    """Part i of the dataset goes to rank i % world_size; one part per step."""

    def __init__(self, rank: int, cfg: TrainConfig):
        self.rank, self.cfg = rank, cfg

    def part_name(self, step: int) -> str:
        return f"part-{step * self.cfg.world_size + self.rank:05d}"

    def load(self, step: int):
        part = self.part_name(step)
        g = torch.Generator().manual_seed(self.cfg.seed * 100_003 + int(part[-5:]))
        n = 0 if part in EMPTY_PARTS else self.cfg.batch_size
        x = torch.randn(n, self.cfg.in_features, generator=g)
        y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(n, 1, generator=g)
        return part, x, y


@ray.remote(num_cpus=0.25)
class TrainWorker:
    def __init__(self, cfg: dict):
        self.cfg = TrainConfig(**cfg)
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])
        torch.set_num_threads(1)
        torch.manual_seed(self.cfg.seed)
        self.model = torch.nn.Linear(self.cfg.in_features, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=self.cfg.lr)
        self.loader = ShardedLoader(self.rank, self.cfg)

    def setup(self, init_file: str) -> int:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{init_file}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(hours=self.cfg.collective_timeout_hours),
        )
        dist.barrier()
        return os.getpid()

    def _allreduce_gradients(self) -> None:
        grads = [p.grad for p in self.model.parameters()]
        bucket = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(bucket, op=dist.ReduceOp.SUM)
        bucket /= self.world_size
        offset = 0
        for g in grads:
            g.copy_(bucket[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def train(self) -> dict:
        loss = torch.tensor(float("nan"))
        for step in range(self.cfg.num_steps):
            part, x, y = self.loader.load(step)
            if x.shape[0] == 0:
                if self.cfg.skip_empty_batches:
                    print(f"WARNING rank {self.rank}: empty batch at step {step}, skipping",
                          flush=True)
                    continue
                raise RuntimeError(f"empty batch from {part}")
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self._allreduce_gradients()
            self.opt.step()
            if self.rank == 0:
                print(f"[rank 0] step {step} loss {loss.item():.4f}", flush=True)
        return {"rank": self.rank, "final_loss": loss.item()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig()
    init_file = f"/tmp/gloo_skipped_allreduce_{os.getpid()}_{time.time_ns()}"
    workers = [
        TrainWorker.options(
            runtime_env={
                "env_vars": {
                    "RANK": str(r),
                    "LOCAL_RANK": str(r),
                    "WORLD_SIZE": str(cfg.world_size),
                    "GLOO_SOCKET_IFNAME": "lo",
                }
            }
        ).remote(asdict(cfg))
        for r in range(cfg.world_size)
    ]
    pids = ray.get([w.setup.remote(init_file) for w in workers])
    print(f"process group up: world_size={cfg.world_size}, rank pids={pids}", flush=True)
    print(f"READY: {cfg.world_size} TrainWorker ranks running {cfg.num_steps} steps of "
          "gloo all_reduce", flush=True)
    results = ray.get([w.train.remote() for w in workers])
    print(f"training finished: {results}", flush=True)


if __name__ == "__main__":
    main()
