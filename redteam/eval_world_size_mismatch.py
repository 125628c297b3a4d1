"""Evaluation ranks form a gloo group with world_size from the config (3) while the driver starts 2 ranks.

Scenario: the driver reads `world_size: 3` from the eval config (written for a 3-node run) but
starts `len(shards)` = 2 EvalRank actors. Each rank calls `dist.init_process_group("gloo",
init_method="tcp://127.0.0.1:PORT", rank=r, world_size=3)` with a one-hour timeout. Rank 0 hosts
the TCPStore; both ranks wait in the rendezvous for a rank 2 that was never started. No error.

Mechanism: a rendezvous waits for a member that does not exist (declared world size larger than
the ranks launched): nothing can join.
Truth: culprit the driver's launch (world_size 3 vs 2 ranks); both ranks are victims, neither
skipped anything. Fix: derive world_size from the ranks actually started (or start 3).
"""
import datetime
import os
import socket

import ray

CONFIG = {"world_size": 3, "shards": ["val-a", "val-b"]}


@ray.remote(num_cpus=0.5)
class EvalRank:
    def __init__(self):
        import torch.distributed  # noqa: F401  (slow import, done before setup)

    def ready(self) -> bool:
        return True

    def setup(self, rank: int, world: int, port: int) -> int:
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(hours=1))
        return rank


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ranks = [EvalRank.remote() for _ in CONFIG["shards"]]
    ray.get([r.ready.remote() for r in ranks])
    port = free_port()
    refs = [r.setup.remote(i, CONFIG["world_size"], port) for i, r in enumerate(ranks)]
    print("READY forming eval group", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
