"""Permits of a semaphore are held by suspended generators that an actor keeps for later.

Scenario: ShardReader (threaded, max_concurrency=4) limits open shard streams with a
BoundedSemaphore(2): the generator `_records` takes a permit with `with self.slots:` and yields
records. `peek(shard, n)` creates (or resumes) a cursor per shard and keeps it in `self.cursors`
so that a later peek continues where it stopped. The driver peeks at shards 0 and 1 (both return),
then at shard 2: its generator blocks at `with self.slots:`. Both permits belong to the two
suspended generators held in `self.cursors`; nothing resumes or closes them. py-spy shows only the
waiting thread; a suspended generator has no stack.

Mechanism: a semaphore whose permits are held by suspended generator frames (not by any thread):
a leaked permit that no thread can release.
Truth: culprit ShardReader (its cached cursors for shards 0 and 1 hold both permits; peek(2) waits
at `with self.slots:` in `_records`); the driver is a victim. Fix: take the permit per read, not
for a generator's lifetime, or close cursors (gen.close()) before opening new ones.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class ShardReader:
    def __init__(self):
        self.slots = threading.BoundedSemaphore(2)
        self.cursors: dict[int, object] = {}

    def _records(self, shard: int):
        with self.slots:
            for i in range(10_000):
                yield f"shard{shard}:{i}"

    def peek(self, shard: int, n: int) -> list[str]:
        it = self.cursors.setdefault(shard, self._records(shard))
        return [next(it) for _ in range(n)]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    reader = ShardReader.remote()
    print(ray.get([reader.peek.remote(0, 3), reader.peek.remote(1, 3)]), flush=True)
    ref = reader.peek.remote(2, 3)
    print("READY peeking", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
