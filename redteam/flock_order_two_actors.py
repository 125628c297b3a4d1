"""Two shard compactors flock the two shard files they merge in opposite orders: an ABBA deadlock on flock.

Scenario: a nightly index compaction. Compactor A merges shard 0 into shard 1, compactor B merges
shard 1 into shard 0. Each takes an exclusive flock on its *source* shard's lock file first
("nobody appends to what I read"), reads it, then takes an exclusive flock on the *destination*
shard's lock file. A holds 0.lock and waits for 1.lock; B holds 1.lock and waits for 0.lock. flock
has no deadlock detection (unlike fcntl POSIX locks), so both wait in flock() forever.

Mechanism: two processes each hold one flock and wait for the other's: a lock-order cycle across
processes through the kernel's flock table (/proc/locks: FLOCK WRITE held by A on 0.lock, by B on
1.lock; both blocked).
Truth: hang; culprit the pair Compactor A / Compactor B (the cycle), both at Compactor.merge's
second `fcntl.flock(dst, LOCK_EX)`. Fix: take the two locks in one global order (sorted by shard id).
"""
import fcntl
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.25)
class Compactor:
    def __init__(self, root):
        self.root = root

    def merge(self, src, dst):
        with open(os.path.join(self.root, f"{src}.lock"), "w") as s:
            fcntl.flock(s, fcntl.LOCK_EX)
            rows = [f"row {src}:{i}\n" for i in range(20000)]
            time.sleep(2)
            with open(os.path.join(self.root, f"{dst}.lock"), "w") as d:
                fcntl.flock(d, fcntl.LOCK_EX)
                with open(os.path.join(self.root, f"{dst}.shard"), "a") as out:
                    out.writelines(rows)
        return len(rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    root = tempfile.mkdtemp(prefix="rt11_flockorder_")
    a, b = Compactor.remote(root), Compactor.remote(root)
    refs = [a.merge.remote(0, 1), b.merge.remote(1, 0)]
    time.sleep(6)
    print("READY: Compactor A holds 0.lock waits 1.lock; B holds 1.lock waits 0.lock", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
