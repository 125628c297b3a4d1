"""Writer threads meet at a threading.Barrier sized for every shard; threads start only for non-empty shards.

Scenario: ShardWriter is built with 4 shard names and `threading.Barrier(len(shards))` (all
shards flush their index together at the end of a write). write() starts one thread per shard
that has rows; one shard is empty this time, so 3 threads start, write their rows, and call
`self.flushed.wait()` (no timeout). The barrier needs 4 parties; the 4th never exists. The main
thread joins the writer threads. All 3 threads alive, none died, no exception.

Mechanism: a barrier whose party count exceeds the threads that will ever reach it (a count
mismatch, not a dead party).
Truth: culprit ShardWriter.write (starts threads for non-empty shards only, the barrier counts all
shards). Fix: size the barrier by the threads started, or start a thread per shard.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class ShardWriter:
    def __init__(self, shards: list[str]):
        self.shards = shards
        self.flushed = threading.Barrier(len(shards))
        self.written: dict[str, int] = {}

    def _write_one(self, shard: str, rows: list[int]) -> None:
        self.written[shard] = sum(rows)
        self.flushed.wait()

    def write(self, rows_by_shard: dict[str, list[int]]) -> dict:
        threads = [threading.Thread(target=self._write_one, args=(s, rows), name=f"writer-{s}")
                   for s, rows in rows_by_shard.items() if rows]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return self.written


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    shards = ["s0", "s1", "s2", "s3"]
    w = ShardWriter.remote(shards)
    ref = w.write.remote({"s0": [1, 2], "s1": [3], "s2": [], "s3": [4, 5, 6]})
    print("READY writing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
