"""The serving team's launcher for weights_to_outside_publisher.py (a driver, and a Ray job, of its
own): starts the detached WeightPublisher that joins the trainers' process group as its last rank,
and exits. Not an example by itself (no EXPECTED)."""

import datetime
import os
import sys
import threading

import ray


@ray.remote(num_cpus=0)
class WeightPublisher:
    """The last rank of the trainers' world group: receives each epoch's weights by broadcast and
    serves them. It takes part only once it is armed (the serving model loaded)."""

    def join(self, store: str, rank: int, world: int) -> int:
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        self.armed = threading.Event()
        threading.Thread(target=self._sync, args=(store, rank, world), name="weight-sync", daemon=True).start()
        return rank

    def arm(self) -> None:
        self.armed.set()

    def _sync(self, store: str, rank: int, world: int) -> None:
        import torch
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=2))
        dist.new_group(list(range(world - 1)))  # the trainers' data-parallel group: every rank must create it
        weights = torch.zeros(64)
        self.armed.wait()  # until the serving side has loaded its model
        while True:
            dist.barrier()
            dist.broadcast(weights, src=0)


if __name__ == "__main__":
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), namespace="serving")
    publisher = WeightPublisher.options(name="weight-publisher", lifetime="detached").remote()
    print("publisher rank", ray.get(publisher.join.remote(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))), flush=True)
    # the launcher was to call publisher.arm.remote() once the serving model is loaded; it exits first
