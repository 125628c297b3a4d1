"""Healthy: one gloo rank waits in all_reduce for minutes while its peer computes its shard's statistics first.

Scenario: a two-rank evaluation job (Ray actors, gloo on CPU) averages per-shard metrics with
`dist.all_reduce`. Rank 1's shard is tiny: it enters the all_reduce at once. Rank 0's shard is big:
it first scores it, a silent numpy loop of ~7 minutes (matmuls on 400x400 blocks, a counter
`block` advancing), and only then calls the same all_reduce. For those minutes rank 1 sits inside
gloo's all_reduce (idle, in C++), rank 0 is busy on CPU and has not entered any collective.
Mechanism (none: healthy): a collective whose missing participant is alive, CPU-busy, and on its
way to the same call (its loop counter advances); the collective completes when it arrives.
Truth: no hang. A right diagnosis is no-hang or inconclusive; collective-wait / collective-mismatch
/ a hang naming either rank is a false hang.
"""
# redteam-settle: 25
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.1)
class EvalRank:
    def __init__(self, rank: int, world: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        store = dist.FileStore(path, world)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def evaluate(self, seconds: float) -> float:
        import numpy as np
        import torch
        import torch.distributed as dist

        score = 0.0
        if self.rank == 0:
            rng = np.random.default_rng(0)
            w = rng.standard_normal((400, 400)) / 20.0
            end = time.time() + seconds
            block = 0
            while time.time() < end:
                x = rng.standard_normal((400, 400))
                score += float(np.tanh(x @ w @ w.T).mean())
                block += 1
        else:
            score = 0.5
        t = torch.tensor([score, 1.0])
        dist.all_reduce(t)
        return float(t[0] / t[1])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tmp = tempfile.mkdtemp(prefix="eval_late_")
    ranks = [EvalRank.remote(r, 2, os.path.join(tmp, "store")) for r in range(2)]
    refs = [r.evaluate.remote(420.0) for r in ranks]
    print("READY evaluating", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
