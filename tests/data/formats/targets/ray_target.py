"""A small Ray job hung the way distributed training jobs hang, for real `ray stack` captures.

Four `Rank` actors run `train_step`: ranks 0, 1 and 3 wait in `all_reduce` on a `ray.util.queue`
that nobody fills (the collective), rank 2 never gets there: it sleeps in `load_shard` (the odd
one out). A `Threaded` actor (max_concurrency=2) has two calls deadlocked on its own locks, an
async actor awaits forever, and a plain task `prefetch` blocks in `ray.get` on an object that is
never produced. The driver blocks in `ray.get` on every rank. Writes the driver pid to `--ready`
once every call has started; connects to `--address` (an isolated test cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time

import ray
from ray.util.queue import Queue

ODD_RANK = 2


@ray.remote
class Rank:
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def train_step(self, queue: Queue) -> int:
        if self.rank == ODD_RANK:
            self.load_shard()
        return self.all_reduce(queue)

    def all_reduce(self, queue: Queue) -> int:
        return int(queue.get())  # every rank waits for a value nobody puts

    def load_shard(self) -> None:
        while True:
            time.sleep(0.5)

    def ping(self) -> int:
        return self.rank


@ray.remote(max_concurrency=2)
class Threaded:
    def __init__(self) -> None:
        self.a = threading.Lock()
        self.b = threading.Lock()
        self.both = threading.Barrier(2)

    def forward(self) -> None:
        with self.a:
            self.both.wait()
            with self.b:
                pass

    def backward(self) -> None:
        with self.b:
            self.both.wait()
            with self.a:
                pass


@ray.remote
class Poller:
    async def poll(self) -> None:
        await asyncio.sleep(3600)


@ray.remote
class Holder:
    def hold(self) -> None:
        while True:
            time.sleep(1.0)


@ray.remote
def prefetch(refs: list[ray.ObjectRef]) -> int:
    return len(ray.get(refs))  # waits for an object that is never produced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--ready", required=True)
    parser.add_argument("--lifetime", type=float, default=300.0)
    args = parser.parse_args()
    ray.init(address=args.address, namespace="parse-capture", log_to_driver=False)
    queue = Queue()
    ranks = [Rank.remote(i) for i in range(4)]
    ray.get([r.ping.remote() for r in ranks])
    steps = [r.train_step.remote(queue) for r in ranks]
    threaded = Threaded.remote()
    locked = [threaded.forward.remote(), threaded.backward.remote()]
    poller = Poller.remote()
    polling = poller.poll.remote()
    holder = Holder.remote()
    held = holder.hold.remote()
    fetch = prefetch.remote([held])
    time.sleep(5.0)  # every call reaches its blocking point
    with open(args.ready, "w", encoding="ascii") as fh:
        fh.write(str(os.getpid()))
    ready, _ = ray.wait(steps + locked + [polling, fetch], timeout=args.lifetime)
    print(f"unexpectedly finished: {ready}")


if __name__ == "__main__":
    main()
