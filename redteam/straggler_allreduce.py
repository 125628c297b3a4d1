"""Healthy: rank 0 waits in a gloo all_reduce for ~3 min while rank 1, a straggler, computes its validation statistics.

Scenario: two gloo ranks (Ray actors). In `finish_epoch`, rank 0 has nothing to compute and
enters `dist.all_reduce(stats)` at once; rank 1 first computes its local statistics — a few
hundred symmetric eigendecompositions (numpy/LAPACK, each well under a second) — and only then
enters the same all_reduce. Silent. Any dump shows rank 0 in `all_reduce` and rank 1 inside
`eigh` at the same source line.

Mechanism (none: healthy): a collective waiting on a straggler that is busy, not blocked.
Truth: no hang (the all_reduce completes when rank 1 arrives). A right diagnosis says no-hang or
inconclusive; collective-skipped / collective-mismatch / a hang naming either rank is a false hang.
"""
# redteam-settle: 25
import datetime
import os
import tempfile

import ray


@ray.remote(num_cpus=0.5)
class Rank:
    def __init__(self, rank: int, world: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def ready(self) -> int:
        return self.rank

    def _local_stats(self, rounds: int) -> float:
        import numpy as np

        rng = np.random.default_rng(self.rank)
        acc = 0.0
        for _ in range(rounds):
            m = rng.random((400, 400))
            acc += float(np.linalg.eigh(m + m.T)[0][-1])
        return acc

    def finish_epoch(self, rounds: int) -> float:
        import torch
        import torch.distributed as dist

        local = self._local_stats(rounds) if self.rank == 1 else 0.0
        stats = torch.tensor([local, 1.0])
        dist.all_reduce(stats)
        return float(stats[0])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="strag_"), "store")
    ranks = [Rank.remote(r, 2, path) for r in range(2)]
    ray.get([r.ready.remote() for r in ranks])
    refs = [r.finish_epoch.remote(4000) for r in ranks]
    print("READY finishing epoch", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
