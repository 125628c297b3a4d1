"""Data-parallel training with PyTorch's Flight Recorder on, where rank 0 broadcasts while the others all_reduce.

Scenario
    Three ``TrainWorker`` actors, one per torch rank (gloo), train a small regression model
    (flattened gradient bucket + ``dist.all_reduce`` per step). Rank 0 owns the validation set:
    every ``eval_every`` steps it validates and ``dist.broadcast``\\ s a stop flag (early
    stopping), which every rank receives. The job runs with the Flight Recorder on
    (``TORCH_FR_BUFFER_SIZE=2000``, ``TORCH_FR_DUMP_TEMP_FILE``), and each rank runs a small
    helper thread that writes ``torch._C._distributed_c10d._dump_fr_trace()`` to
    ``$TORCH_FR_DUMP_TEMP_FILE<rank>`` after a few seconds without progress (gloo has no
    watchdog dump), then ends.

Mechanism
    The two sides decide "is this an evaluation step" with different code after a refactor:
    rank 0's ``Validator.due`` counts steps from 1 (``(step + 1) % eval_every == 0``: after
    step 2), the receivers' ``TrainConfig.is_eval_step`` from 0 (``step % eval_every == 0 and
    step > 0``: after step 3). After step 2 rank 0 enters ``broadcast`` while ranks 1 and 2 go
    on to the gradient ``all_reduce`` of step 3. gloo pairs collectives by call order: the
    fourth collective of the default group is a broadcast on rank 0 and an all_reduce on
    ranks 1-2; nothing is exchanged and all three wait forever (no error; the collective
    timeout is 24 h). The Flight Recorder dumps show it directly: collective #4 of the default
    group is ``gloo:broadcast [[1]]`` on rank 0 and ``gloo:all_reduce [[9]]`` on ranks 1 and 2.

What misleads
    All three ranks sit in a collective and the stacks differ only by call site, so picking the
    odd stack or blaming gloo is tempting - and rank 0 in ``broadcast`` looks like it is
    correctly waiting for the others to join. Wrong: the two sides count evaluation steps
    differently; the Flight Recorder shows collective #4 of the default group is a broadcast on
    rank 0 and an all_reduce on ranks 1-2.

Expected diagnosis
    ``collective-mismatch``: every rank inside a torch.distributed collective, not the same one:
    rank 0 in ``broadcast`` (``TrainWorker._validate_and_broadcast``), ranks 1 and 2 in
    ``all_reduce`` (``_allreduce_gradients``). Culprit: the TrainWorker with rank 0, the odd one
    out. Flight Recorder: default group, desync at collective #4 (rank 0 ``gloo:broadcast``,
    ranks 1-2 ``gloo:all_reduce``), odd one out rank 0; it agrees with the stacks.
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
    "culprits": [{"class_name": "TrainWorker", "rank": 0}],
    "ready": "flight recorder dump written",
    "flight_recorder": {"group_desc": "default_pg", "pending_seq": 4, "culprit_ranks": [0], "kind": "desync"},
    "notes": "rank 0 validates after step 2 ((step+1) % 3) and broadcasts the stop flag; ranks 1-2 expect it "
    "after step 3 (step % 3) and go on to the step-3 gradient all_reduce. Default group collective #4 is a "
    "broadcast on rank 0 and an all_reduce on ranks 1-2: all wait forever, no error. Flight Recorder dumps "
    "(helper thread after a stall) show the desync at #4.",
}

STALL_S = 3.0  # no step finished for this long: the helper thread writes the Flight Recorder dump


@dataclass
class TrainConfig:
    world_size: int = 3
    num_steps: int = 8
    eval_every: int = 3
    batch_size: int = 16
    in_features: int = 8
    lr: float = 0.05
    collective_timeout_hours: float = 24.0
    seed: int = 0

    def is_eval_step(self, step: int) -> bool:
        """Receivers: the step after which rank 0 broadcasts its early-stopping decision."""
        return step % self.eval_every == 0 and step > 0


class Validator:
    """Rank 0's validation loop and early-stopping rule."""

    def __init__(self, cfg: TrainConfig):
        self.cfg, self.best, self.bad_rounds = cfg, float("inf"), 0

    def due(self, step: int) -> bool:
        return (step + 1) % self.cfg.eval_every == 0

    def should_stop(self, model: torch.nn.Module) -> bool:
        g = torch.Generator().manual_seed(12345)
        x = torch.randn(64, self.cfg.in_features, generator=g)
        with torch.no_grad():
            loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True)).item()
        self.bad_rounds = 0 if loss < self.best else self.bad_rounds + 1
        self.best = min(self.best, loss)
        return self.bad_rounds >= 3


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
        self.gen = torch.Generator().manual_seed(self.cfg.seed * 1000 + self.rank)
        self.validator = Validator(self.cfg) if self.rank == 0 else None
        self.last_progress = [float("inf")]

    def setup(self, init_file: str) -> int:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{init_file}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(hours=self.cfg.collective_timeout_hours),
        )
        threading.Thread(target=dump_when_stalled, args=(self.rank, self.last_progress),
                         name="fr-dump", daemon=True).start()
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

    def _validate_and_broadcast(self) -> bool:
        assert self.validator is not None
        flag = torch.tensor([1.0 if self.validator.should_stop(self.model) else 0.0])
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    def _receive_decision(self) -> bool:
        flag = torch.zeros(1)
        dist.broadcast(flag, src=0)
        return bool(flag.item())

    def train(self) -> dict:
        loss = torch.tensor(float("nan"))
        self.last_progress[0] = time.monotonic()
        for step in range(self.cfg.num_steps):
            x, y = self._batch()
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self._allreduce_gradients()
            self.opt.step()
            print(f"[rank {self.rank}] step {step} loss {loss.item():.4f}", flush=True)
            if self.validator is not None and self.validator.due(step):
                stop = self._validate_and_broadcast()
            elif self.validator is None and self.cfg.is_eval_step(step):
                stop = self._receive_decision()
            else:
                stop = False
            self.last_progress[0] = time.monotonic()
            if stop:
                break
        return {"rank": self.rank, "final_loss": loss.item()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig()
    tag = f"{os.getpid()}_{time.time_ns()}"
    init_file = f"/tmp/fr_early_stop_broadcast_{tag}"
    dump_prefix = f"/tmp/debug_hang_fr/fr_early_stop_broadcast_{tag}/rank_"
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
    print(f"process group up: world_size={cfg.world_size}, rank pids={pids}, dumps under {dump_prefix}*", flush=True)
    print(f"READY: {cfg.world_size} TrainWorker ranks, early-stopping decision every {cfg.eval_every} steps", flush=True)
    results = ray.get([w.train.remote() for w in workers])
    print(f"training finished: {results}", flush=True)


if __name__ == "__main__":
    main()
