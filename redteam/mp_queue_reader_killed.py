"""Decode workers share one multiprocessing.Queue; one was SIGKILLed inside get() holding the queue's reader lock.

Scenario: an actor feeds a `multiprocessing.Queue` with 200 paths and starts 3 decode processes
(fork) that loop `q.get()`. Worker 0 is killed with SIGKILL (as by the OOM killer) while blocked
inside `q.get()` on the then-empty queue — i.e. while holding the queue's `_rlock`, a
process-shared semaphore (multiprocessing.synchronize.Lock / SemLock). The feeder then puts the
paths. Workers 1 and 2 wait forever in `q.get()` → `with self._rlock:` although the queue holds
200 items; the actor waits in `p.join()` on them. No error anywhere (the pool is hand-rolled).

Mechanism: a process-shared lock (POSIX semaphore) held by a dead process; the living
consumers wait on it, not on the (non-empty) queue.
Truth: culprit the killed decode worker 0 (died holding `_rlock`); workers 1 and 2 and the actor
are victims. Fix: a process pool that detects dead workers (concurrent.futures / torch
DataLoader), `q.get(timeout=...)`, and find why worker 0 was killed (memory).
"""
import multiprocessing as mp
import os
import signal
import time

import ray


def decode_loop(q, done) -> None:
    while True:
        path = q.get()
        if path is None:
            return
        done.put(len(path))


@ray.remote(num_cpus=0.5)
class DecodePool:
    def run(self, n: int) -> int:
        ctx = mp.get_context("fork")
        q, done = ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=decode_loop, args=(q, done), name=f"decode-{i}") for i in range(3)]
        procs[0].start()
        time.sleep(1.0)  # worker 0 now blocks in q.get() on the empty queue, holding q._rlock
        while not _in_get(procs[0].pid):
            time.sleep(0.1)
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].join()
        for p in procs[1:]:
            p.start()
        for i in range(n):
            q.put(f"/data/img/{i:05d}.jpg")
        for _ in procs:
            q.put(None)
        for p in procs[1:]:
            p.join()
        return done.qsize()


def _in_get(pid: int) -> bool:
    """The worker is asleep in the kernel (the blocking read of q.get), not still starting."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "S"
    except OSError:
        return False


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pool = DecodePool.remote()
    ref = pool.run.remote(200)
    print("READY decoding", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
