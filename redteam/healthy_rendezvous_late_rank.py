"""Evaluation ranks form a gloo group of 3; the third rank's constructor is slow (it loads a checkpoint).

Scenario: the driver starts ranks 0 and 1, which enter `dist.init_process_group("gloo",
init_method="tcp://127.0.0.1:PORT", rank=r, world_size=3)` at once, then starts rank 2, whose
constructor spends ~100 s loading its shard (a loop of 1 s reads) before its `setup` call can run.
For those 100 s ranks 0 and 1 wait in the rendezvous; then rank 2 joins and the job finishes.

Mechanism: a rendezvous waiting for a rank that is still starting (its actor's constructor is
running): fewer ranks in the group than world_size, but the missing one exists and will join.
Truth: healthy (slow start); not a hang, and certainly not "the launch started too few ranks".
"""
# redteam-settle: 20
import datetime
import os
import socket
import time

import ray


@ray.remote(num_cpus=0.5)
class EvalRank:
    def __init__(self, warmup_s: int = 0):
        import torch.distributed  # noqa: F401  (slow import, done before setup)

        for _ in range(warmup_s):  # reading the checkpoint shard, 1 s per chunk
            time.sleep(1.0)

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
    ranks = [EvalRank.remote() for _ in range(2)]
    ray.get([r.ready.remote() for r in ranks])
    port = free_port()
    refs = [r.setup.remote(i, 3, port) for i, r in enumerate(ranks)]
    late = EvalRank.remote(warmup_s=100)
    refs.append(late.setup.remote(2, 3, port))
    print("READY forming eval group (rank 2 still loading)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
