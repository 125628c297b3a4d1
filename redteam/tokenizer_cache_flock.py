"""A cache builder keeps an exclusive flock on the cache's lock file after building; the loader actor waits for it.

Scenario: CacheBuilder.build() takes `fcntl.flock(fh, LOCK_EX)` on `<cache>/.lock` (so no other
process reads a half-written vocab), writes the vocab, and keeps the open file in
`self._lock_fh` to be unlocked by `publish()` after the driver has validated the cache. The driver
validates by loading it first: `loader.load()` in another actor (another process) takes
`fcntl.flock(fh, LOCK_SH)` on the same file and blocks. The builder is idle (no call running);
the lock lives in its process's open file, not in any thread.

Mechanism: an advisory file lock (flock) held by an idle sibling process; the waiter is in a
blocking flock() syscall (visible in /proc/locks and /proc/<pid>/fdinfo).
Truth: culprit CacheBuilder (holds LOCK_EX while idle; publish() never runs because the driver
waits on the loader first). Loader and driver are victims. Fix: release the lock at the end of
build() (a `with` block), or validate before taking the lock / call publish() first.
"""
import fcntl
import os
import tempfile

import ray


@ray.remote(num_cpus=0.1)
class CacheBuilder:
    def build(self, cache_dir: str) -> str:
        self._lock_fh = open(os.path.join(cache_dir, ".lock"), "w")
        fcntl.flock(self._lock_fh, fcntl.LOCK_EX)
        with open(os.path.join(cache_dir, "vocab.txt"), "w") as out:
            out.write("\n".join(f"tok{i}" for i in range(5000)))
        return cache_dir

    def publish(self) -> None:
        fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
        self._lock_fh.close()


@ray.remote(num_cpus=0.1)
class VocabLoader:
    def load(self, cache_dir: str) -> int:
        with open(os.path.join(cache_dir, ".lock")) as fh:
            fcntl.flock(fh, fcntl.LOCK_SH)
            with open(os.path.join(cache_dir, "vocab.txt")) as f:
                n = sum(1 for _ in f)
            fcntl.flock(fh, fcntl.LOCK_UN)
        return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cache_dir = tempfile.mkdtemp(prefix="tokcache_")
    builder, loader = CacheBuilder.remote(), VocabLoader.remote()
    ray.get(builder.build.remote(cache_dir))
    n_ref = loader.load.remote(cache_dir)
    print("READY validating cache", flush=True)
    n = ray.get(n_ref)
    ray.get(builder.publish.remote())
    print("vocab size", n)


if __name__ == "__main__":
    main()
