"""Healthy: two gloo ranks all-reduce large tensors back to back, silently: samples always in all_reduce.

Scenario: a bandwidth benchmark. Two Ray actors (a FileStore rendezvous, gloo on loopback)
all-reduce a 16M-float tensor (64 MB) 400 times with no logging; each call takes ~0.3-1 s here,
so nearly every py-spy sample of both ranks is in `all_reduce` at the same line, the other thread
in gloo's native code. The iteration counter advances every call.
Truth: no hang (both ranks complete a collective every second or so).
"""
# redteam-settle: 25
import datetime
import os
import tempfile

import ray


@ray.remote(num_cpus=0.5)
class BenchRank:
    def __init__(self, rank: int, world: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def run(self, iters: int) -> float:
        import torch
        import torch.distributed as dist

        t = torch.ones(16 << 20)
        for _ in range(iters):
            dist.all_reduce(t)
            t.div_(2.0)
        return float(t[0])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="bench_"), "store")
    ranks = [BenchRank.remote(r, 2, path) for r in range(2)]
    refs = [r.run.remote(400) for r in ranks]
    print("READY benchmarking", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
