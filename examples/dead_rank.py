"""Data-parallel training (torch.distributed, gloo) where one rank dies and its peers hang.

Scenario
    Four ``TrainWorker`` actors, one per torch rank, train a small regression model with
    hand-rolled data parallelism (flattened gradient bucket + ``dist.all_reduce`` per step). A
    fail-fast guard aborts the process when the loss is not finite, so that a diverged run can
    never write a checkpoint ("treat NaN like a CUDA error").

Mechanism
    Rank 3's data for step 4 (``part-00019``) contains ``inf`` features, its loss is NaN, and it
    prints ``CUDA-like error: NaN in loss at step 4 on rank 3, aborting`` to stderr and calls
    ``os._exit(1)`` -- before it reaches the all_reduce of step 4. The actor has no restarts,
    so Ray marks it DEAD (WORKER_DIED, a generic "worker died unexpectedly" message: the exit
    code and the NaN message are only in rank 3's own worker log). The other ranks are already
    in (or entering) the step-4 all_reduce. gloo's ring neighbours of rank 3 may notice the
    closed sockets and raise, but ranks further round the ring wait forever for data that never
    comes (``collective_timeout_hours`` is set high, as people do for slow checkpoints). The
    driver waits for every rank with ``ray.wait(..., num_returns=len(refs))`` so that it can
    report all rank failures together, and therefore never returns.

What misleads
    Ranks whose tasks FAILED with gloo "Connection reset by peer" look like the cause, and
    ``death_cause`` ("worker unexpectedly exits") reads as OOM or a segfault. Wrong: they are
    the dead rank's ring neighbours; the DEAD actor is the culprit and its own ``.err`` log says
    why (NaN in loss, then exit).

Expected diagnosis
    ``peer-rank-dead``: at least one TrainWorker rank is stuck in ``all_reduce``
    (torch/distributed/distributed_c10d.py) of step 4; the TrainWorker actor of rank 3 is DEAD
    (``death_cause``: WORKER_DIED) and its ``train`` task FAILED (ACTOR_DIED). Culprit: the dead
    rank 3. Ranks whose train task FAILED with a gloo "Connection closed by peer" error are
    collateral damage, not root causes.
"""

import datetime
import os
import sys
import time
from dataclasses import asdict, dataclass

import ray
import torch
import torch.distributed as dist

EXPECTED = {
    "verdict": "hang",
    "pattern": "peer-rank-dead",
    "culprits": [{"class_name": "TrainWorker", "rank": 3}],
    "notes": "rank 3 hits a NaN loss at step 4 (inf in part-00019) and os._exit(1)s before the "
    "step-4 all_reduce; actor DEAD (WORKER_DIED, generic message; real reason only in its "
    "worker .err log). Surviving ranks wait in all_reduce of step 4 (ring neighbours may raise "
    "'Connection closed by peer' instead); driver waits in ray.wait for all ranks.",
}

# Parts of the training set with corrupted (inf) feature values.
CORRUPT_PARTS = {"part-00019"}


@dataclass
class TrainConfig:
    world_size: int = 4
    num_steps: int = 8
    batch_size: int = 16
    in_features: int = 8
    lr: float = 0.05
    collective_timeout_hours: float = 24.0
    abort_on_nan: bool = True
    seed: int = 0


class ShardedLoader:
    """Part i of the dataset goes to rank i % world_size; one part per step."""

    def __init__(self, rank: int, cfg: TrainConfig):
        self.rank, self.cfg = rank, cfg

    def load(self, step: int):
        part = f"part-{step * self.cfg.world_size + self.rank:05d}"
        g = torch.Generator().manual_seed(self.cfg.seed * 100_003 + int(part[-5:]))
        x = torch.randn(self.cfg.batch_size, self.cfg.in_features, generator=g)
        y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(self.cfg.batch_size, 1, generator=g)
        if part in CORRUPT_PARTS:
            x[0, 0] = float("inf")
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
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            if self.cfg.abort_on_nan and not torch.isfinite(loss):
                print(f"CUDA-like error: NaN in loss at step {step} on rank {self.rank} "
                      f"({part}), aborting", file=sys.stderr, flush=True)
                os._exit(1)
            loss.backward()
            self._allreduce_gradients()
            self.opt.step()
            if self.rank == 0:
                print(f"[rank 0] step {step} loss {loss.item():.4f}", flush=True)
        return {"rank": self.rank, "final_loss": loss.item()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig()
    init_file = f"/tmp/dead_rank_{os.getpid()}_{time.time_ns()}"
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
    refs = [w.train.remote() for w in workers]
    # Wait for every rank before collecting, so all failures are reported together.
    ready, _ = ray.wait(refs, num_returns=len(refs))
    for rank, ref in enumerate(ready):
        try:
            print(f"rank {rank}: {ray.get(ref)}", flush=True)
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"rank {rank} failed: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()
