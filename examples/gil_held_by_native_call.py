"""A feature-store actor whose native binding blocks on a mutex while it holds the GIL.

Scenario
    A ``FeatureStore`` actor wraps a small native cache (here libc's pthread mutex, reached
    through ctypes, standing in for a C extension's own lock). A background ``refresher``
    thread takes the cache's mutex through ``ctypes.CDLL`` (which releases the GIL during the
    call) and then keeps it while it rebuilds the cache in Python. ``lookup`` calls the same
    lock through a binding loaded with ``ctypes.PyDLL``, which keeps the GIL across the call.
    The driver calls ``lookup`` in a loop.

Mechanism
    ``lookup`` blocks in ``pthread_mutex_lock`` with the GIL held. The refresher, which holds the
    mutex, needs the GIL to run its next Python line and waits for it forever: a GIL deadlock.
    No Python code of the process runs again; the actor's task stays RUNNING and the driver
    waits in ``ray.get``.

What misleads
    Every thread looks idle in innocent Python lines: the refresher in ``time.sleep``, ``lookup``
    at the line that calls the binding. Nothing in Python waits on a lock. Only py-spy's GIL
    ownership (``owns_gil`` on an idle thread in its JSON) or native frames (``take_gil`` in the
    refresher, ``pthread_mutex_lock`` under ``lookup``) show what happened.

Expected diagnosis
    ``gil-holder-blocked``: the FeatureStore thread running ``lookup`` holds the GIL while blocked
    in native code (``pthread_mutex_lock`` with ``--native``); the refresher waits for the GIL.
    Culprit: FeatureStore. The driver (in ray.get) is a victim.
"""

import ctypes
import os
import threading
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "gil-holder-blocked",
    "culprits": [{"class_name": "FeatureStore", "rank": None}],
    "notes": "lookup() calls pthread_mutex_lock through ctypes.PyDLL (the GIL kept) on the cache "
    "mutex the refresher thread took through ctypes.CDLL; the refresher then waits for the GIL.",
}

MUTEX_BYTES = 40  # sizeof(pthread_mutex_t) on x86_64 glibc


@ray.remote(num_cpus=0.1, max_concurrency=2)
class FeatureStore:
    def __init__(self) -> None:
        self._releasing = ctypes.CDLL("libc.so.6")  # calls release the GIL
        self._binding = ctypes.PyDLL("libc.so.6")  # calls keep it: a binding built without nogil
        self._cache_mutex = ctypes.create_string_buffer(MUTEX_BYTES)
        self._releasing.pthread_mutex_init(self._cache_mutex, None)
        self._features = {i: float(i) for i in range(1000)}
        self._rebuilding = threading.Event()
        threading.Thread(target=self._refresher, name="refresher", daemon=True).start()

    def _refresher(self) -> None:
        self._releasing.pthread_mutex_lock(self._cache_mutex)
        self._rebuilding.set()
        for _ in range(10_000):  # a slow rebuild with the cache locked
            self._features = {k: v + 1 for k, v in self._features.items()}
            time.sleep(0.05)
        self._releasing.pthread_mutex_unlock(self._cache_mutex)

    def lookup(self, key: int) -> float:
        self._rebuilding.wait(5)
        self._binding.pthread_mutex_lock(self._cache_mutex)  # blocks with the GIL held
        try:
            return self._features[key]
        finally:
            self._binding.pthread_mutex_unlock(self._cache_mutex)


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = FeatureStore.remote()
    print("READY: FeatureStore.lookup blocks in its native binding with the GIL held", flush=True)
    for key in range(100):
        print(f"feature {key}: {ray.get(store.lookup.remote(key))}", flush=True)


if __name__ == "__main__":
    main()
