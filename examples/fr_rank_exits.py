"""Data-parallel training with PyTorch's Flight Recorder on, where one rank dies and the others hang.

Scenario
    Four ``TrainWorker`` actors, one per torch rank (gloo), train a small regression model
    (flattened gradient bucket + ``dist.all_reduce`` per step). Each rank checks its host
    memory before a step and exits hard when it is over budget, the way an OOM killer or a
    CUDA error would take a rank down. The job runs with the Flight Recorder on
    (``TORCH_FR_BUFFER_SIZE=2000``, ``TORCH_FR_DUMP_TEMP_FILE``); each rank runs a small helper
    thread that writes ``torch._C._distributed_c10d._dump_fr_trace()`` to
    ``$TORCH_FR_DUMP_TEMP_FILE<rank>`` after a few seconds without progress (gloo has no
    watchdog dump), then ends.

Mechanism
    Rank 3's memory check fails at step 3 (its ``host_memory_budget_gb`` comes from a per-rank
    override that is far too small) and it calls ``os._exit(1)`` before the step-3 all_reduce.
    Its actor has no restarts: Ray marks it DEAD (WORKER_DIED, a generic message). The other
    ranks are in the step-3 all_reduce, collective #4 of the default group: gloo's ring
    neighbours of rank 3 may notice the closed sockets and raise, the others wait forever
    (``collective_timeout_hours`` is 24). A dead rank writes no dump: the Flight Recorder shows
    ranks 0-2 in collective #4 and no dump from rank 3; Ray's state says why.

What misleads
    Ranks 0-2 are in collective #4 and the Flight Recorder has no dump from rank 3, which reads
    as "rank 3's dump was lost" or a gloo problem. Wrong: a dead rank writes no dump; Ray shows
    its actor DEAD (WORKER_DIED, a generic message), and its own log says it exited on a memory
    check before the step-3 all_reduce.

Expected diagnosis
    ``peer-rank-dead``: at least one rank stuck in ``all_reduce`` (torch/distributed/distributed_c10d.py);
    the TrainWorker of rank 3 is DEAD (WORKER_DIED) and its ``train`` task FAILED. Culprit: the
    dead rank 3. Flight Recorder: default group collective #4 entered by ranks 0, 1, 2, no dump
    from rank 3; it agrees with the stacks.
"""

import datetime
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

import ray
import torch
import torch.distributed as dist

EXPECTED = {
    "verdict": "hang",
    "pattern": "peer-rank-dead",
    "culprits": [{"class_name": "TrainWorker", "rank": 3}],
    "ready": "flight recorder dump written",
    "flight_recorder": {"group_desc": "default_pg", "pending_seq": 4, "culprit_ranks": [3], "kind": "no-dump"},
    "notes": "rank 3's host-memory check fails at step 3 (a per-rank override of 0.001 GB) and it os._exit(1)s "
    "before the step-3 all_reduce; actor DEAD (WORKER_DIED). Ranks 0-2 are in default group collective #4 "
    "(ring neighbours may raise 'Connection closed by peer'). Flight Recorder: #4 entered by 0, 1, 2, no dump "
    "from rank 3.",
}

STALL_S = 3.0  # no step finished for this long: the helper thread writes the Flight Recorder dump


@dataclass
class TrainConfig:
    world_size: int = 4
    num_steps: int = 8
    batch_size: int = 16
    in_features: int = 8
    lr: float = 0.05
    host_memory_budget_gb: float = 64.0
    # Per-rank overrides (a leftover from a debugging session on a smaller host).
    rank_overrides: dict = field(default_factory=lambda: {"3": {"host_memory_budget_gb": 0.001}})
    collective_timeout_hours: float = 24.0
    seed: int = 0


def rss_gb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e9


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
        self.rank = int(os.environ["RANK"])
        cfg = {**cfg, **cfg["rank_overrides"].get(str(self.rank), {})}
        self.cfg = TrainConfig(**cfg)
        self.world_size = int(os.environ["WORLD_SIZE"])
        torch.set_num_threads(1)
        torch.manual_seed(self.cfg.seed)
        self.model = torch.nn.Linear(self.cfg.in_features, 1)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=self.cfg.lr)
        self.gen = torch.Generator().manual_seed(self.cfg.seed * 1000 + self.rank)
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
        self.last_progress[0] = time.monotonic()
        for step in range(self.cfg.num_steps):
            if step >= 3 and rss_gb() > self.cfg.host_memory_budget_gb:
                print(f"rank {self.rank}: host memory {rss_gb():.2f} GB over budget "
                      f"{self.cfg.host_memory_budget_gb} GB at step {step}, exiting", file=sys.stderr, flush=True)
                os._exit(1)
            x = torch.randn(self.cfg.batch_size, self.cfg.in_features, generator=self.gen)
            y = x.sum(dim=1, keepdim=True)
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            self._allreduce_gradients()
            self.opt.step()
            if self.rank == 0:
                print(f"[rank 0] step {step} loss {loss.item():.4f}", flush=True)
            self.last_progress[0] = time.monotonic()
        return {"rank": self.rank, "final_loss": loss.item()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig()
    tag = f"{os.getpid()}_{time.time_ns()}"
    init_file = f"/tmp/fr_rank_exits_{tag}"
    dump_prefix = f"/tmp/debug_hang_fr/fr_rank_exits_{tag}/rank_"
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
    print(f"READY: {cfg.world_size} TrainWorker ranks running {cfg.num_steps} steps of gloo all_reduce", flush=True)
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
