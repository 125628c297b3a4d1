"""Healthy: a reader waits on the index's flock while a sibling actor compacts the index under LOCK_EX for ~3 min.

Scenario: IndexCompactor.compact takes `fcntl.flock(LOCK_EX)` on `<index>/.lock`, then rewrites
the index: lzma-compresses 2400 blocks of 256 KB of posting text (CPU-bound, ~0.1 s each) into
`index.new` and renames it at the end, then unlocks. IndexReader.load, started once the compactor
holds the lock, waits in `fcntl.flock(LOCK_SH)` in another process. Nothing is logged. The holder
is busy (CPU, bytes written every second), not idle.

Mechanism (none: healthy): a file lock held by a live, busy process that will release it.
Truth: no hang. A right diagnosis says no-hang or inconclusive; `file-lock-held` (a holder that
does not release it) or any hang is a false hang.
"""
# redteam-settle: 25
import fcntl
import lzma
import os
import random
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
class IndexCompactor:
    def compact(self, index_dir: str, blocks: int) -> int:
        written = 0
        with open(os.path.join(index_dir, ".lock"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            open(os.path.join(index_dir, "compacting"), "w").close()
            rng = random.Random(0)  # noqa: S311 (synthetic text)
            words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
            block = " ".join(rng.choice(words) for _ in range(40000)).encode()[: 256 << 10]
            with open(os.path.join(index_dir, "index.new"), "wb") as out:
                for i in range(blocks):
                    data = lzma.compress(block[i % 997:] + block[: i % 997], preset=6)
                    out.write(data)
                    out.flush()
                    written += len(data)
            os.replace(os.path.join(index_dir, "index.new"), os.path.join(index_dir, "index"))
            fcntl.flock(lk, fcntl.LOCK_UN)
        return written


@ray.remote(num_cpus=0.1)
class IndexReader:
    def load(self, index_dir: str) -> int:
        with open(os.path.join(index_dir, ".lock")) as lk:
            fcntl.flock(lk, fcntl.LOCK_SH)
            size = os.path.getsize(os.path.join(index_dir, "index"))
            fcntl.flock(lk, fcntl.LOCK_UN)
        return size


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    index_dir = tempfile.mkdtemp(prefix="index_")
    compactor, reader = IndexCompactor.remote(), IndexReader.remote()
    done = compactor.compact.remote(index_dir, 2400)
    while not os.path.exists(os.path.join(index_dir, "compacting")):
        time.sleep(0.2)
    size = reader.load.remote(index_dir)
    print("READY reading index", flush=True)
    print(ray.get(done), ray.get(size))


if __name__ == "__main__":
    main()
