"""Distributed training whose process group never forms: one rank is pinned to a node that is gone.

Scenario
    A launcher starts one ``TrainWorker`` actor per torch rank from a static host list in the
    job config (``rank_hosts``), pinning each rank to its host with Ray's per-node resource
    ``node:<ip>`` so that ranks land where their local data shards live. Every rank then calls
    ``init_process_group`` (gloo, a FileStore on shared storage) with ``WORLD_SIZE=4``; the
    driver waits for all four ``setup`` calls before training.

Mechanism
    The host list was copied from last week's cluster: rank 3 is pinned to ``10.42.0.17``, a
    node that has since been removed. No node offers ``node:10.42.0.17``, so the rank-3 actor
    stays ``PENDING_CREATION`` (pid 0) forever — Ray only logs an autoscaler event "No available
    node types can fulfill resource request" and shows a pending demand in ``ray status``.
    The launcher's start-up wait logs ranks 0-2 as they come up, then gives up waiting for rank 3
    after ``start_stall_s`` with a warning ("they will join the process group once scheduled")
    and calls ``setup`` on every rank. Ranks 0-2 enter ``init_process_group`` and wait in the
    rendezvous for a fourth rank that never comes; rank 3's ``setup`` stays
    ``PENDING_NODE_ASSIGNMENT`` behind its actor. No error, no timeout
    (``rendezvous_timeout_hours`` is large).

What misleads
    Ranks 0-2 wait in ``init_process_group``, which looks like a network, firewall or
    MASTER_ADDR problem. Wrong: rank 3 never started - its actor is ``PENDING_CREATION`` (pid 0)
    because it is pinned to ``node:10.42.0.17``, a node that no longer exists; the fix is the
    host list, not the rendezvous.

Expected diagnosis
    ``infeasible-resource``: ranks 0, 1, 2 wait in ``init_process_group``
    (torch/distributed/distributed_c10d.py) for the missing peer; the TrainWorker with rank 3 is
    PENDING_CREATION because its request ``{CPU: 0.25, node:10.42.0.17: 0.01}`` fits no node.
    Culprit: that resource request and the rank-3 TrainWorker. The driver waits in ray.get on
    the four ``setup`` calls.
"""

import datetime
import os
import time
from dataclasses import asdict, dataclass, field

import ray
import torch
import torch.distributed as dist

EXPECTED = {
    "verdict": "hang",
    "pattern": "infeasible-resource",
    "culprits": [{"class_name": "TrainWorker", "rank": 3}],
    "notes": "rank_hosts pins rank 3 to node:10.42.0.17, a node no longer in the cluster; the "
    "rank-3 actor is PENDING_CREATION forever; ranks 0-2 wait in init_process_group "
    "(WORLD_SIZE=4, FileStore) for it; driver in ray.get on the setup calls.",
}


def _default_hosts() -> list:
    # ranks 0-2 on this machine; rank 3 on the second data node (decommissioned since)
    return ["127.0.0.1", "127.0.0.1", "127.0.0.1", "10.42.0.17"]


@dataclass
class TrainConfig:
    rank_hosts: list = field(default_factory=_default_hosts)
    num_steps: int = 10
    batch_size: int = 16
    in_features: int = 8
    lr: float = 0.05
    rendezvous_timeout_hours: float = 24.0
    first_start_timeout_s: float = 180.0  # cold nodes pull the image first
    start_stall_s: float = 8.0  # no further rank came up for this long: go on without waiting
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

    def where(self) -> str:
        return f"node {ray.get_runtime_context().get_node_id()[:8]} pid {os.getpid()}"

    def setup(self, init_file: str) -> int:
        print(f"[rank {self.rank}] joining process group of {self.world_size}", flush=True)
        dist.init_process_group(
            "gloo",
            init_method=f"file://{init_file}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=datetime.timedelta(hours=self.cfg.rendezvous_timeout_hours),
        )
        return os.getpid()

    def train(self) -> float:
        gen = torch.Generator().manual_seed(self.cfg.seed * 1000 + self.rank)
        loss = torch.tensor(float("nan"))
        for _ in range(self.cfg.num_steps):
            x = torch.randn(self.cfg.batch_size, self.cfg.in_features, generator=gen)
            y = x.sum(dim=1, keepdim=True)
            self.opt.zero_grad()
            loss = torch.nn.functional.mse_loss(self.model(x), y)
            loss.backward()
            for p in self.model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= self.world_size
            self.opt.step()
        return loss.item()


def launch_workers(cfg: TrainConfig) -> list:
    world_size = len(cfg.rank_hosts)
    workers = []
    for rank, host in enumerate(cfg.rank_hosts):
        env = {"RANK": str(rank), "LOCAL_RANK": "0", "WORLD_SIZE": str(world_size),
               "GLOO_SOCKET_IFNAME": "lo"}
        workers.append(TrainWorker.options(
            resources={f"node:{host}": 0.01},  # keep each rank next to its data shard
            runtime_env={"env_vars": env},
        ).remote(asdict(cfg)))
    return workers


def wait_for_workers(workers: list, cfg: TrainConfig) -> None:
    """Log ranks as they come up; when start-up stalls, go on: late ranks join the rendezvous
    when they are scheduled (init_process_group waits for them)."""
    refs = {w.where.remote(): rank for rank, w in enumerate(workers)}
    pending = list(refs)
    timeout = cfg.first_start_timeout_s
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=timeout)
        if not ready:
            late = sorted(refs[r] for r in pending)
            print(f"WARNING: ranks {late} not started after {timeout:.0f}s; continuing, "
                  "they will join the process group once scheduled", flush=True)
            return
        print(f"rank {refs[ready[0]]} up: {ray.get(ready[0])}", flush=True)
        timeout = cfg.start_stall_s


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig()
    init_file = f"/tmp/rendezvous_hang_{os.getpid()}_{time.time_ns()}"
    workers = launch_workers(cfg)
    print(f"launched {len(workers)} ranks on {cfg.rank_hosts}", flush=True)
    wait_for_workers(workers, cfg)
    print("READY: waiting for every rank to join the process group", flush=True)
    pids = ray.get([w.setup.remote(init_file) for w in workers])
    print(f"process group up: rank pids={pids}", flush=True)
    losses = ray.get([w.train.remote() for w in workers])
    print(f"training finished: {losses}", flush=True)


if __name__ == "__main__":
    main()
