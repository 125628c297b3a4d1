"""Data-parallel training (torch.distributed, gloo) where rank 0 waits in a barrier the others never enter.

Scenario
    Three ``TrainWorker`` actors, one per torch rank, train a small regression model with
    hand-rolled data parallelism (each step: local gradients, one flattened ``all_reduce``, SGD
    step, as DDP does internally). Every ``checkpoint_every`` steps rank 0 writes a checkpoint,
    and a ``dist.barrier()`` is supposed to keep every rank from running ahead before the
    checkpoint is on shared storage.

Mechanism
    The barrier was indented one level too deep: it sits inside ``if self.rank == 0:`` next to
    the save, so only rank 0 calls it. After step 2 (``checkpoint_every=3``) rank 0 enters
    ``barrier`` while ranks 1 and 2 go on to the ``all_reduce`` of step 3. gloo pairs collectives by
    call order, so the two all_reduce calls and rank 0's barrier are the same "collective" for
    gloo but different operations: nothing is exchanged, nothing errors, and all three ranks
    wait forever (verified with py-spy: rank 0 in ``barrier``, ranks 1-2 in ``all_reduce``,
    stable for minutes). ``collective_timeout_hours`` is high, as people set it for slow
    checkpoints, so it never times out in practice.

What misleads
    Ranks 1 and 2 are in ``all_reduce`` and rank 0 in a collective too, so every rank looks "in
    the collective" and the network or gloo gets the blame. Wrong: rank 0 is in ``barrier``, the
    others in ``all_reduce`` - different operations that gloo pairs by call order; the barrier
    indented into ``if rank == 0:`` is the bug.

Expected diagnosis
    ``collective-mismatch``: every rank is inside a torch.distributed collective, but not the
    same one: ranks 1 and 2 in ``all_reduce`` (``_allreduce_gradients``), rank 0 in ``barrier``
    (``_maybe_checkpoint``). Culprit: the TrainWorker with rank 0, the odd one out. The driver
    waits in ray.get on the three ``train`` tasks, all RUNNING.
"""

import datetime
import os
import tempfile
import time
from dataclasses import asdict, dataclass

import ray
import torch
import torch.distributed as dist

EXPECTED = {
    "verdict": "hang",
    "pattern": "collective-mismatch",
    "culprits": [{"class_name": "TrainWorker", "rank": 0}],
    "notes": "rank 0 saves a checkpoint after step 2 and calls dist.barrier() inside "
    "`if self.rank == 0:` (mis-indented), ranks 1-2 go on to the all_reduce of step 3; "
    "gloo pairs by call order, so barrier and all_reduce never complete. All three train "
    "tasks RUNNING, no error.",
}


@dataclass
class TrainConfig:
    world_size: int = 3
    num_steps: int = 8
    batch_size: int = 16
    in_features: int = 8
    lr: float = 0.05
    checkpoint_every: int = 3
    checkpoint_dir: str = ""
    collective_timeout_hours: float = 24.0
    seed: int = 0


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
        self.gen = torch.Generator().manual_seed(self.cfg.seed * 1000 + self.rank)

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

    def _batch(self):
        x = torch.randn(self.cfg.batch_size, self.cfg.in_features, generator=self.gen)
        y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(self.cfg.batch_size, 1, generator=self.gen)
        return x, y

    def _allreduce_gradients(self) -> None:
        grads = [p.grad for p in self.model.parameters()]
        bucket = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(bucket, op=dist.ReduceOp.SUM)
        bucket /= self.world_size
        offset = 0
        for g in grads:
            g.copy_(bucket[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def _maybe_checkpoint(self, step: int) -> None:
        if (step + 1) % self.cfg.checkpoint_every != 0:
            return
        if self.rank == 0:
            path = os.path.join(self.cfg.checkpoint_dir, f"step-{step:06d}.pt")
            torch.save({"step": step, "model": self.model.state_dict()}, path)
            print(f"[rank 0] saved checkpoint {path}", flush=True)
            # no rank may resume from the checkpoint before it is fully written
            dist.barrier()

    def train(self) -> dict:
        loss = torch.tensor(float("nan"))
        for step in range(self.cfg.num_steps):
            x, y = self._batch()
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self._allreduce_gradients()
            self.opt.step()
            print(f"[rank {self.rank}] step {step} loss {loss.item():.4f}", flush=True)
            self._maybe_checkpoint(step)
        return {"rank": self.rank, "final_loss": loss.item()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig(checkpoint_dir=tempfile.mkdtemp(prefix="collective_mismatch_ckpt_"))
    init_file = f"/tmp/collective_mismatch_{os.getpid()}_{time.time_ns()}"
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
    print(f"READY: {cfg.world_size} TrainWorker ranks, checkpoint + barrier every "
          f"{cfg.checkpoint_every} steps", flush=True)
    results = ray.get([w.train.remote() for w in workers])
    print(f"training finished: {results}", flush=True)


if __name__ == "__main__":
    main()
