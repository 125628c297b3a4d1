"""Healthy: a writer waits in flock() on a shard file that a compactor task holds through minutes of work.

Scenario: an index shard on local disk is guarded by an advisory `fcntl.flock` lock file. A
`compact` task takes LOCK_EX and rewrites the shard: a silent pure-Python merge of ~7 minutes (sorting
and merging postings, a counter `merged` advancing, a line written to the shard file every few
thousand postings). An IndexWriter actor's `append()` then asks for the same LOCK_EX and blocks in
flock (in the kernel) until the compaction ends; the driver waits on both.
Mechanism (none: healthy): a file lock held by another live process that is computing and releases
it when its loop ends (/proc/locks shows the holder's pid, which is RUNNING and CPU-busy).
Truth: no hang. A right diagnosis is no-hang or inconclusive; lock-wait / file-lock-deadlock / a
hang naming IndexWriter or compact is a false hang.
"""
# redteam-settle: 25
import fcntl
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
def compact(lock_path: str, shard_path: str, seconds: float) -> int:
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = 0
        end = time.time() + seconds
        with open(shard_path, "a") as shard:
            while time.time() < end:
                postings = sorted((merged * 7919 + k * 104729) % 1000003 for k in range(20_000))
                merged += len(postings)
                shard.write(f"{merged} {postings[len(postings) // 2]}\n")
                shard.flush()
        fcntl.flock(lock, fcntl.LOCK_UN)
    return merged


@ray.remote(num_cpus=0.1)
class IndexWriter:
    def __init__(self, lock_path: str, shard_path: str):
        self.lock_path, self.shard_path = lock_path, shard_path

    def append(self, doc: str) -> str:
        with open(self.lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(self.shard_path, "a") as shard:
                shard.write(doc + "\n")
            fcntl.flock(lock, fcntl.LOCK_UN)
        return "ok"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    root = tempfile.mkdtemp(prefix="shard_compact_")
    lock_path, shard_path = os.path.join(root, "shard-3.lock"), os.path.join(root, "shard-3.dat")
    job = compact.remote(lock_path, shard_path, 420.0)
    writer = IndexWriter.remote(lock_path, shard_path)
    while os.path.getsize(shard_path) == 0 if os.path.exists(shard_path) else True:
        time.sleep(0.5)
    out = writer.append.remote("doc-77")
    print("READY compacting", flush=True)
    print(ray.get([job, out]))


if __name__ == "__main__":
    main()
