"""An actor's thread pool runs its consumers first: they wait on a queue whose producer job is queued in the same pool.

Scenario: a ShardMerger actor merges sorted shard files for an eval set. `merge(paths)` uses one
`ThreadPoolExecutor(max_workers=3)` for everything: it first submits 3 "merge writer" jobs that
each take decoded records from a shared `queue.Queue` (`q.get()`, no timeout) and then submits
the "decode" job that reads the shards and puts records on that queue. All three workers are
taken by the writers, blocked in `Queue.get`; the decode job sits in the executor's work queue
(`_work_queue`) and will never be picked up. `merge` waits in `concurrent.futures.wait` on all
futures; the driver waits in `ray.get(merge)`.

Mechanism: a thread pool waiting on itself through a queue (not through a Future): every worker
waits on data that only a job queued behind them in the same pool would produce.
Truth: culprit ShardMerger (merge: the pool is sized for the consumers only; the producer job is
queued behind them). Fix: run the decoder on its own thread/executor (or max_workers >= consumers
+ 1, or submit the producer first).
"""
import os
import queue
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, wait

import ray


@ray.remote(num_cpus=0.5)
class ShardMerger:
    def __init__(self, workers: int = 3):
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="merge")
        self.workers = workers

    def _write(self, q: queue.Queue[tuple[int, str] | None], out: str) -> int:
        n = 0
        with open(out, "w") as fh:
            while True:
                rec = q.get()
                if rec is None:
                    return n
                fh.write(f"{rec[0]}\t{rec[1]}\n")
                n += 1

    def _decode(self, paths: list[str], q: queue.Queue[tuple[int, str] | None]) -> int:
        n = 0
        for p in paths:
            with open(p) as fh:
                for line in fh:
                    k, v = line.rstrip("\n").split("\t")
                    q.put((int(k), v))
                    n += 1
        for _ in range(self.workers):
            q.put(None)
        return n

    def merge(self, paths: list[str], out_dir: str) -> int:
        q: queue.Queue[tuple[int, str] | None] = queue.Queue(maxsize=1024)
        writers = [self.pool.submit(self._write, q, os.path.join(out_dir, f"part-{i}.tsv"))
                   for i in range(self.workers)]
        decoder = self.pool.submit(self._decode, paths, q)
        wait(writers + [decoder])
        return decoder.result()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    d = tempfile.mkdtemp(prefix="merge_")
    paths = []
    for s in range(4):
        p = os.path.join(d, f"shard-{s}.tsv")
        with open(p, "w") as fh:
            for i in range(2000):
                fh.write(f"{s * 2000 + i}\tsample-{s}-{i}\n")
        paths.append(p)
    merger = ShardMerger.remote()
    ref = merger.merge.remote(paths, d)
    time.sleep(1)
    print("READY merging shards", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
