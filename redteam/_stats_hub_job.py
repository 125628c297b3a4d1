"""A separate driver (its own job) for stats_hub_rank.py: starts the detached StatsHub rank and exits."""
import datetime
import os
import queue
import sys
import threading

import ray


@ray.remote(num_cpus=0.1)
class StatsHub:
    """Joins the trainers' process group as its last rank and all-reduces what it is given."""

    def join(self, rank: int, world: int, store: str, warmup: int) -> int:
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        self.inbox: queue.Queue = queue.Queue()
        self.warmup = warmup
        self.rank = rank
        self.ready = threading.Event()
        threading.Thread(target=self._run, args=(rank, world, store), name="stats-reducer", daemon=True).start()
        return rank

    def _run(self, rank: int, world: int, store: str) -> None:
        import torch
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=2))
        for _ in range(self.warmup):  # the warm-up statistics rounds
            dist.all_reduce(torch.zeros(1024))
        while True:  # after warm-up it only reduces what publish() hands it
            dist.all_reduce(self.inbox.get())

    def publish(self, values: list[float]) -> None:
        import torch
        self.inbox.put(torch.tensor(values))


if __name__ == "__main__":
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace="monitoring")
    hub = StatsHub.options(name="stats-hub", lifetime="detached").remote()
    print("stats hub rank", ray.get(hub.join.remote(int(sys.argv[2]), int(sys.argv[3]), sys.argv[1], 3)), flush=True)
