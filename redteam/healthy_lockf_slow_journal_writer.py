"""Healthy: a reader waits on a POSIX record lock (fcntl.lockf) that the journal writer holds through a slow fsync'd write.

Scenario: a replay journal shared by two actors. The JournalWriter takes `fcntl.lockf(fd,
LOCK_EX)` on the journal and appends ~120 chunks, each followed by `os.fsync` and a 2 s pause
(throttled by the storage: "at most one chunk per 2 s"), ~4 minutes in all, then unlocks. The
JournalReader wants a consistent snapshot and waits in `fcntl.lockf(fd, LOCK_SH)` meanwhile —
one frame, no log, no finished task. /proc/locks shows a POSIX WRITE lock held by the writer and
the reader blocked on it.

Mechanism: a POSIX (fcntl) lock wait whose holder is alive and making progress: its file grows,
its syscalls are writes/fsyncs and sleeps between them.
Truth: healthy (no hang); the reader gets the lock after ~4 min. A right answer is no-hang, or
inconclusive naming the writer's slow writes; "hang" is a false hang.
"""
import fcntl
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.25)
class JournalWriter:
    def append(self, path, chunks, pause):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        try:
            for i in range(chunks):
                os.write(fd, (f"chunk {i} ".encode() + b"x" * 65536) + b"\n")
                os.fsync(fd)
                time.sleep(pause)
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
            os.close(fd)
        return chunks


@ray.remote(num_cpus=0.25)
class JournalReader:
    def snapshot(self, path):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH)
            size = os.fstat(fd).st_size
            fcntl.lockf(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        return size


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt11_journal_"), "replay.journal")
    w, r = JournalWriter.remote(), JournalReader.remote()
    wref = w.append.remote(path, 120, 2.0)
    time.sleep(3)
    rref = r.snapshot.remote(path)
    print("READY: JournalReader in lockf(LOCK_SH) while JournalWriter appends slowly under LOCK_EX", flush=True)
    print(ray.get([wref, rref]))


if __name__ == "__main__":
    main()
