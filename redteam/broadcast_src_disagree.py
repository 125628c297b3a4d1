"""Two gloo ranks call broadcast with different source ranks: each waits to receive from the other.

Scenario: a 2-rank CPU torch.distributed (gloo) job syncs a config tensor with `dist.broadcast`.
The source rank is read from an environment variable each rank's actor was started with
(`CONFIG_OWNER`): the launcher set it per worker from its own rank id, so rank 0 broadcasts
with src=0 and rank 1 with src=1. Both enter the same collective; each sends and waits for the
other's contribution as a receiver; neither ever returns. No error, no timeout reached (1 h).

Mechanism: one collective, two ranks, disagreeing on its arguments (the root): a collective
mismatch that both ranks sit in.
Truth: culprit both ranks (the src argument differs per rank; the launcher's env); fix: compute
src identically on every rank (e.g. 0) or pass it from the driver.
"""
import datetime
import os
import socket

import ray


@ray.remote(num_cpus=0.1)
class Rank:
    def __init__(self, rank: int, world: int, port: int) -> None:
        self.rank, self.world, self.port = rank, world, port

    def run(self) -> str:
        import torch
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port))
        dist.init_process_group("gloo", rank=self.rank, world_size=self.world,
                                timeout=datetime.timedelta(hours=1))
        t = torch.zeros(4)
        dist.all_reduce(t)  # the first collective pairs: the group works
        src = int(os.environ.get("CONFIG_OWNER", "0"))
        print(f"rank {self.rank}: broadcast config from src={src}", flush=True)
        cfg = torch.full((4,), float(self.rank))
        dist.broadcast(cfg, src=src)
        return f"rank {self.rank} config {cfg.tolist()}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = free_port()
    ranks = [Rank.options(runtime_env={"env_vars": {"CONFIG_OWNER": str(r)}}).remote(r, 2, port) for r in range(2)]
    refs = [r.run.remote() for r in ranks]
    print("READY: 2 gloo ranks syncing config", flush=True)
    print(ray.get(refs), flush=True)


if __name__ == "__main__":
    main()
