"""Healthy: a forked child holds a multiprocessing.Lock while it compacts for minutes; the parent waits for it.

# redteam-settle: 25
Scenario: LedgerCompactor.append() starts a forked `compact` child that takes the shared
`ctx.Lock()` and rewrites the ledger in pure Python (checksumming ~3 minutes, no output), then
releases it. The parent starts the child, waits a moment, then `with self.lock:` to append --
it waits in sem_wait while the live child computes; the child is not joined first.
Mechanism: a process-shared lock held by a live, computing child.
Truth: healthy (no culprit); the child finishes, the lock is released, append returns. The twin of
ledger_writer; a hang verdict is wrong.
Driver in ray.get(append).
"""
import multiprocessing as mp
import os
import time

import ray

CTX = mp.get_context("fork")


def checksum(n):
    h = 7
    for i in range(n):
        h = (h * 31 + (i ^ (h >> 5))) & 0xFFFFFFFF
    return h


def compact(lock, path, n):
    with lock:
        h = checksum(n)
        with open(path, "w") as f:
            f.write(f"{h}\n")


@ray.remote(num_cpus=1)
class LedgerCompactor:
    def __init__(self):
        self.lock = CTX.Lock()
        self.path = f"/tmp/ledger_c_{os.getpid()}.log"

    def append(self, rows, n):
        p = CTX.Process(target=compact, args=(self.lock, self.path, n))
        p.start()
        time.sleep(0.5)
        with self.lock:
            with open(self.path, "a") as f:
                f.writelines(f"{r}\n" for r in rows)
        p.join()
        return len(rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = LedgerCompactor.remote()
    ref = w.append.remote(["a", "b"], 500_000_000)
    time.sleep(3)
    print("READY: driver -> LedgerCompactor.append (child holds the lock, computing)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
