"""Reproduction: a finaliser run by the garbage collector re-enters a non-reentrant library lock
that the same thread already holds. ThreadPoolExecutor.submit holds its _shutdown_lock while it
allocates the Future; that allocation starts a GC pass, which finalises an unreachable handle
whose __del__ schedules its release on the same executor: submit() again, same lock, same thread
(the Ray Client form: ClientObjectRef.__del__ -> DataClient.lock, ray-project/ray#59643).
Usage: gc_del_reenters_executor.py [GC_THRESHOLD] (the allocation count that lands the pass inside
the lock; 5 on CPython 3.11). Prints READY when stuck."""

import gc
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

releaser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="releaser")


def release(object_id: int) -> None:
    pass


class RemoteRef:
    """A handle to a remote object; dropping it schedules a release request."""

    def __init__(self, object_id: int) -> None:
        self.object_id = object_id
        self.cycle = self  # only the cyclic GC frees it

    def __del__(self) -> None:
        releaser.submit(release, self.object_id)


def submit_step(threshold: int) -> None:
    RemoteRef(7)  # unreachable at once, freed by the next GC pass
    gc.set_threshold(threshold)
    releaser.submit(release, 0)


if __name__ == "__main__":
    threading.Timer(1.5, lambda: print("READY", os.getpid(), flush=True)).start()
    gc.collect()
    submit_step(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
    print("no deadlock", flush=True)
    os._exit(0)
