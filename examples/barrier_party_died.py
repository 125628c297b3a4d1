"""Checkpoint writer whose parallel parts meet at a threading.Barrier that one part never reaches.

Scenario
    A ``ShardWriter`` actor writes a checkpoint in three parts on three threads of its own, then
    each part waits at a ``threading.Barrier(3)`` so the manifest is written only once every part
    is on disk. The actor's method starts the threads and joins them. The ``Trainer`` (here the
    driver) waits in ``ray.get`` for the checkpoint.

Mechanism
    Part 2 computes its chunk size from an empty shard and raises ``ZeroDivisionError`` before it
    reaches the barrier; the thread dies (its traceback goes to the worker's .err log). The barrier
    has no timeout, so parts 0 and 1 wait in ``Barrier.wait`` (a ``Condition.wait``) forever, and
    the method's main thread waits in ``Thread.join`` on them.

What misleads
    Three threads of the actor run job code, so it looks as if one of them could still release
    the others. None can: two wait at the same barrier line and the third only joins them. The
    stack shows no error; the missing party is the dead thread, visible only in the .err log.

Expected diagnosis
    ``event-never-set``: ShardWriter's part threads wait at ``barrier.wait()`` inside
    ``ShardWriter.write_all``; the other job-code threads are peers at the same line or join them,
    so nothing in the process will release them; the dead part's ``ZeroDivisionError`` is quoted
    from the worker log. Culprit: ShardWriter. The driver waits in ray.get on it.
"""

import os
import threading

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "event-never-set",
    "culprits": [{"class_name": "ShardWriter", "rank": None}],
    "notes": "ShardWriter.write_all: 3 part threads meet at threading.Barrier(3) (no timeout); part 2 "
    "raises ZeroDivisionError before the barrier and dies; parts 0-1 wait in Barrier.wait, the main "
    "thread in Thread.join. Driver in ray.get on ShardWriter.",
}

SHARD_ROWS = (100, 200, 0)


@ray.remote(num_cpus=0.1)
class ShardWriter:
    def write_all(self) -> str:
        barrier = threading.Barrier(len(SHARD_ROWS))

        def part(i: int) -> None:
            rows_per_chunk = 1000 // SHARD_ROWS[i]  # the empty shard divides by zero
            assert rows_per_chunk > 0
            barrier.wait()

        threads = [threading.Thread(target=part, args=(i,), name=f"part-{i}") for i in range(len(SHARD_ROWS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return "manifest written"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    writer = ShardWriter.remote()
    print("READY: driver -> ShardWriter.write_all (3 parts at a threading.Barrier, part 2 dies)", flush=True)
    print(ray.get(writer.write_all.remote()), flush=True)


if __name__ == "__main__":
    main()
