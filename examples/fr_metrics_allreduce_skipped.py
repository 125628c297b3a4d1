"""Data-parallel training with PyTorch's Flight Recorder on, where one rank skips a metrics all_reduce.

Scenario
    Three ``TrainWorker`` actors, one per torch rank (gloo), train a small regression model:
    every step each rank ``all_reduce``\\ s its flattened gradients on the default process group;
    every ``log_every`` steps the ranks also average their training loss over a second process
    group, ``metrics`` (``dist.new_group(group_desc="metrics")``), for the dashboard. The job is
    launched the way the Flight Recorder docs advise: ``TORCH_FR_BUFFER_SIZE=2000`` and
    ``TORCH_FR_DUMP_TEMP_FILE`` pointing at a dump folder. gloo has no watchdog that dumps on a
    timeout (NCCL's ``TORCH_NCCL_DUMP_ON_TIMEOUT=1`` does), so each rank runs a small helper
    thread that writes ``torch._C._distributed_c10d._dump_fr_trace()`` to
    ``$TORCH_FR_DUMP_TEMP_FILE<rank>`` once the training loop has made no progress for a few
    seconds, then ends.

Mechanism
    Rank 1's loss at step 3 is NaN (an ``inf`` in part ``part-00010``); the metrics code skips
    "bad" values rather than polluting the averages (``skip_nonfinite_metrics=True``), so rank 1
    does not enter the metrics all_reduce of step 3 and goes on to the gradient all_reduce of
    step 4 on the default group. Ranks 0 and 2 wait in the metrics all_reduce for rank 1, rank 1
    waits in the gradient all_reduce for ranks 0 and 2: a deadlock across two process groups,
    with every rank inside ``dist.all_reduce`` -- the stacks differ only by call site. No error
    anywhere (``collective_timeout_hours`` is high, as people set it for slow checkpoints). The
    Flight Recorder dumps say which collective of which group: in group ``metrics``, collective
    #4 was enqueued by ranks 0 and 2 and never by rank 1 (its ``last_enqueued_collective`` is
    3); in the default group, #5 was enqueued by rank 1 only. Each rank's buffer keeps its
    collectives in call order across groups: ranks 0 and 2 agree, rank 1 departs from them at
    ``metrics`` #4, so rank 1 started the deadlock.

What misleads
    Every rank is in ``dist.all_reduce``, so the stacks look alike and the hang looks like a
    slow or broken network. Wrong: ranks 0 and 2 wait in the ``metrics`` group's collective #4,
    which rank 1 never entered (it skipped a NaN loss) and instead waits in the default group's
    #5 - two groups, one deadlock; the Flight Recorder names the group and sequence number.

Expected diagnosis
    ``collective-mismatch``: ranks 0 and 2 in ``all_reduce`` (torch/distributed/distributed_c10d.py)
    from ``TrainWorker._log_metrics``, rank 1 in ``all_reduce`` from
    ``TrainWorker._allreduce_gradients``. Culprit: the TrainWorker with rank 1. Flight Recorder:
    process group ``metrics``, collective #4 (``gloo:all_reduce``) never entered by rank 1,
    which waits in the default group's #5 instead; it agrees with the stacks.
"""

import datetime
import os
import threading
import time
from dataclasses import asdict, dataclass

import ray
import torch
import torch.distributed as dist

EXPECTED = {
    "verdict": "hang",
    "pattern": "collective-mismatch",
    "culprits": [{"class_name": "TrainWorker", "rank": 1}],
    "ready": "flight recorder dump written",
    "flight_recorder": {"group_desc": "metrics", "pending_seq": 4, "culprit_ranks": [1], "kind": "never-entered"},
    "notes": "rank 1's loss is NaN at step 3 and the metrics code skips the metrics all_reduce; ranks 0, 2 "
    "wait in the metrics all_reduce (group 'metrics' #4), rank 1 in the next gradient all_reduce (default "
    "group #5): a cross-group deadlock, every rank in dist.all_reduce. Flight Recorder dumps (written by a "
    "helper thread after a stall) show metrics #4 never entered by rank 1.",
}

# Parts of the training set with corrupted (inf) feature values.
CORRUPT_PARTS = {"part-00010"}
STALL_S = 3.0  # no step finished for this long: the helper thread writes the Flight Recorder dump


@dataclass
class TrainConfig:
    world_size: int = 3
    num_steps: int = 6
    log_every: int = 1
    batch_size: int = 16
    in_features: int = 8
    lr: float = 0.05
    skip_nonfinite_metrics: bool = True
    collective_timeout_hours: float = 24.0
    seed: int = 0


def dump_when_stalled(rank: int, last_progress: list[float]) -> None:
    """Write this rank's Flight Recorder buffer once training stops moving (gloo has no watchdog dump)."""
    from torch._C._distributed_c10d import _dump_fr_trace

    while time.monotonic() - last_progress[0] < STALL_S:
        time.sleep(0.5)
    path = os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "wb") as fh:
        fh.write(_dump_fr_trace())
    os.replace(path + ".tmp", path)
    print(f"flight recorder dump written: {path}", flush=True)


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
        self.last_progress = [float("inf")]

    def setup(self, init_file: str) -> int:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{init_file}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(hours=self.cfg.collective_timeout_hours),
        )
        self.metrics_group = dist.new_group(list(range(self.world_size)), group_desc="metrics")
        threading.Thread(target=dump_when_stalled, args=(self.rank, self.last_progress),
                         name="fr-dump", daemon=True).start()
        return os.getpid()

    def _batch(self, step: int):
        part = f"part-{step * self.world_size + self.rank:05d}"
        g = torch.Generator().manual_seed(self.cfg.seed * 100_003 + int(part[-5:]))
        x = torch.randn(self.cfg.batch_size, self.cfg.in_features, generator=g)
        y = x.sum(dim=1, keepdim=True) + 0.1 * torch.randn(self.cfg.batch_size, 1, generator=g)
        if part in CORRUPT_PARTS:
            x[0, 0] = float("inf")
        return x, y

    def _allreduce_gradients(self) -> None:
        grads = [p.grad for p in self.model.parameters()]
        bucket = torch.nan_to_num(torch.cat([g.reshape(-1) for g in grads]))
        dist.all_reduce(bucket, op=dist.ReduceOp.SUM)
        bucket /= self.world_size
        offset = 0
        for g in grads:
            g.copy_(bucket[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def _log_metrics(self, step: int, loss: torch.Tensor) -> None:
        if self.cfg.skip_nonfinite_metrics and not torch.isfinite(loss):
            print(f"rank {self.rank}: non-finite loss at step {step}, not logged", flush=True)
            return
        mean = loss.detach().reshape(1).clone()
        dist.all_reduce(mean, group=self.metrics_group)
        if self.rank == 0:
            print(f"[rank 0] step {step} mean loss {mean.item() / self.world_size:.4f}", flush=True)

    def train(self) -> dict:
        loss = torch.tensor(float("nan"))
        self.last_progress[0] = time.monotonic()
        for step in range(self.cfg.num_steps):
            x, y = self._batch(step)
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self._allreduce_gradients()
            self.opt.step()
            if step % self.cfg.log_every == 0:
                self._log_metrics(step, loss)
            self.last_progress[0] = time.monotonic()
        return {"rank": self.rank, "final_loss": loss.item()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig()
    tag = f"{os.getpid()}_{time.time_ns()}"
    init_file = f"/tmp/fr_metrics_allreduce_skipped_{tag}"
    dump_prefix = f"/tmp/debug_hang_fr/fr_metrics_allreduce_skipped_{tag}/rank_"
    os.makedirs(os.path.dirname(dump_prefix), exist_ok=True)
    workers = [
        TrainWorker.options(
            runtime_env={
                "env_vars": {
                    "RANK": str(r),
                    "LOCAL_RANK": str(r),
                    "WORLD_SIZE": str(cfg.world_size),
                    "GLOO_SOCKET_IFNAME": "lo",
                    "TORCH_FR_BUFFER_SIZE": "2000",
                    "TORCH_FR_DUMP_TEMP_FILE": dump_prefix,
                }
            }
        ).remote(asdict(cfg))
        for r in range(cfg.world_size)
    ]
    pids = ray.get([w.setup.remote(init_file) for w in workers])
    print(f"process groups up: world_size={cfg.world_size}, rank pids={pids}, dumps under {dump_prefix}*", flush=True)
    print(f"READY: {cfg.world_size} TrainWorker ranks training, metrics averaged on their own group", flush=True)
    results = ray.get([w.train.remote() for w in workers])
    print(f"training finished: {results}", flush=True)


if __name__ == "__main__":
    main()
