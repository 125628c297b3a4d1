"""A multiprocessing.Lock taken by a forked child that exits with os._exit while holding it.

Scenario: LedgerWriter.append() shares `self.lock = ctx.Lock()` (fork context) with a forked
`compact` child that rewrites the ledger file under the lock. The child validates the segment
and, on a bad checksum, calls `os._exit(3)` ("skip atexit handlers in a forked child") inside the
locked region -- os._exit runs no finally/with exit, so the POSIX semaphore behind the Lock stays
taken; nothing records who held it. The parent joins the child (exit code 3, it logs it) and then
does `with self.lock:` to append: it waits forever in sem_wait.
Mechanism: a process-shared lock whose holder process died while holding it.
Truth: hang; culprit the dead compact child (its `os._exit(3)`, line 30, inside `with lock:`,
line 26); the waiter is LedgerWriter.append's `with self.lock:` (line 46). Fix: exit after leaving
the lock (return an error code), release in finally, or acquire with a timeout and rebuild.
Driver in ray.get(append).
"""
import multiprocessing as mp
import os
import time
import zlib

import ray

CTX = mp.get_context("fork")


def compact(lock, path):
    with lock:
        data = b"entry\n" * 1000
        if zlib.crc32(data) != 0:
            print("compact: segment checksum mismatch; aborting", flush=True)
            os._exit(3)
        with open(path, "wb") as f:
            f.write(data)


@ray.remote(num_cpus=0.1)
class LedgerWriter:
    def __init__(self):
        self.lock = CTX.Lock()
        self.path = f"/tmp/ledger_{os.getpid()}.log"

    def append(self, rows):
        p = CTX.Process(target=compact, args=(self.lock, self.path))
        p.start()
        p.join()
        print(f"compact exited with {p.exitcode}", flush=True)
        with self.lock:
            with open(self.path, "a") as f:
                f.writelines(f"{r}\n" for r in rows)
        return len(rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = LedgerWriter.remote()
    ref = w.append.remote(["a", "b"])
    time.sleep(3)
    print("READY: driver -> LedgerWriter.append (mp.Lock held by a child that exited)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
