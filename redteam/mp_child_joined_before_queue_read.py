"""A parent joins a child process before reading the multiprocessing.Queue the child filled: the child cannot exit.

Scenario: a ShardStats actor computes per-shard statistics in a forked child (`multiprocessing`,
fork context) that puts its result — a few MB of histograms — into a `multiprocessing.Queue`, and
the actor does `proc.join()` *then* `queue.get()`. A process that has put items into a queue
waits at exit until its queue feeder thread has flushed them into the pipe (Python docs,
"Joining processes that use queues"); the pipe holds 64 KiB, so the child's exit waits for the
parent to read, and the parent waits for the child to exit.

Mechanism: the parent waits in `Process.join` for a child whose exit (`Queue._finalize_join` → the
feeder thread blocked writing the full pipe) waits for the parent to read the queue.
Truth: hang; culprit ShardStats.compute's `proc.join()` before `queue.get()` (the child is its
victim). Fix: get the results before joining (or use a Pool / `cancel_join_thread` with care).
"""
import multiprocessing as mp
import os

import ray


def histograms(queue, shard: int) -> None:
    counts = [((i * 2654435761) ^ shard) % 1000 for i in range(800_000)]
    queue.put({"shard": shard, "counts": counts})


@ray.remote(num_cpus=1)
class ShardStats:
    def compute(self, shard: int) -> int:
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        proc = ctx.Process(target=histograms, args=(queue, shard), name=f"stats-{shard}")
        proc.start()
        proc.join()
        result = queue.get()
        return len(result["counts"])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    stats = ShardStats.remote()
    ref = stats.compute.remote(7)
    print("READY computing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
