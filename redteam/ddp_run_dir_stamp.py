"""Two gloo ranks each stamp the run directory with their own start time: they rendezvous in different FileStores.

Scenario: a data-parallel fine-tune (two Ray actor ranks, gloo on CPU). Each rank's `setup()`
builds the rendezvous file from the run directory, `f"{base}/run-{time.strftime('%H%M%S')}/store"`,
"so reruns do not reuse a stale store" — computed in each rank, not once in the driver. Rank 1 is
created after rank 0 has loaded its shard (~3 s later), so its stamp differs: the ranks log
different paths ("rendezvous at .../run-230101/store" vs "run-230104"). Each calls
`init_process_group("gloo", init_method=f"file://{path}", world_size=2)` and waits for the other
rank in its own FileStore (timeout 1 h). The driver waits on both setups.

Mechanism: a collective group that never forms because the ranks joined differently named
rendezvous (two stores, each with one member).
Truth: hang; culprit the path line in Ranker.setup (`run_dir = f"{base}/run-{time.strftime(...)}"`),
both ranks (each waits for a peer that will never join its store). Fix: compute the rendezvous
path once in the driver and pass it to every rank.
"""
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
class Ranker:
    def __init__(self, rank: int):
        self.rank = rank

    def setup(self, base: str) -> int:
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        run_dir = f"{base}/run-{time.strftime('%H%M%S')}"
        os.makedirs(run_dir, exist_ok=True)
        path = f"{run_dir}/store"
        print(f"rank {self.rank}: rendezvous at {path}", flush=True)
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=self.rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        return self.rank


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    base = tempfile.mkdtemp(prefix="rt15_ddp_")
    r0 = Ranker.remote(0)
    s0 = r0.setup.remote(base)
    time.sleep(3)  # rank 1's shard is loaded after rank 0's
    r1 = Ranker.remote(1)
    s1 = r1.setup.remote(base)
    time.sleep(6)
    print("READY both ranks in setup", flush=True)
    print(ray.get([s0, s1]))


if __name__ == "__main__":
    main()
