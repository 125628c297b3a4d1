"""A cache writer takes an exclusive flock on its lock file twice, through two open() calls: it waits for itself.

Scenario: VocabCache.rebuild takes the cache's lock (`with cache_lock(path):` opens
`vocab.lock` and flock(LOCK_EX)) and then calls `self._write_atomic(...)`, a helper that
"to be safe" takes the same lock again through its own `cache_lock(path)` — a second open() of
the file. flock locks belong to the open file description, not the process: the second
flock(LOCK_EX) on the new descriptor conflicts with the first one, held by the same thread two
frames up, and blocks forever (no error, no EDEADLK: flock does not detect deadlocks). /proc/locks
shows the FLOCK held by this very pid; the thread sleeps in flock (locks_lock_inode_wait).
The driver waits in ray.get.

Mechanism: a flock self-deadlock: the holder of the exclusive lock (this process, another fd) is
the waiter itself; nobody else could release it.
Truth: culprit VocabCache._write_atomic (re-takes the lock through a new fd while rebuild holds it;
the outer `with cache_lock` is the holder). Fix: take the lock once (pass the fd down / a
re-entrant in-process guard), or use fcntl/lockf-style per-process locks knowingly.
"""
import contextlib
import fcntl
import os
import tempfile

import ray


@contextlib.contextmanager
def cache_lock(path):
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


@ray.remote(num_cpus=0.5)
class VocabCache:
    def __init__(self):
        self.path = os.path.join(tempfile.mkdtemp(prefix="rt10_vocab_"), "vocab.txt")

    def _write_atomic(self, words):
        with cache_lock(self.path):
            tmp = self.path + ".tmp"
            with open(tmp, "w") as fh:
                fh.write("\n".join(words))
            os.replace(tmp, self.path)

    def rebuild(self, n):
        with cache_lock(self.path):
            words = sorted({f"tok{i % 997}" for i in range(n)})
            print(f"rebuild: {len(words)} words, writing", flush=True)
            self._write_atomic(words)
        return len(words)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cache = VocabCache.remote()
    ref = cache.rebuild.remote(50_000)
    print("READY: driver -> VocabCache.rebuild (flock taken twice through two fds)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
