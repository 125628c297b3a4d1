"""A method holds its actor's lock while it waits on a Future that the loader thread completes only after taking that lock.

Scenario
    A ``ModelCache`` actor serves model weights. ``refresh(name)`` takes ``self._mu`` (it guards
    the cache), hands a request with a fresh ``concurrent.futures.Future`` to the actor's loader
    thread through a ``queue.Queue``, and waits for the Future - still inside ``with self._mu:``.
    The loader thread takes each request, loads the blob, stores it under ``with self._mu:`` and
    then completes the Future.

Mechanism
    ``refresh`` holds ``self._mu`` and waits in ``Future.result``; the loader, holding that same
    Future, waits at ``with self._mu:`` for the lock ``refresh`` holds. Two threads of one
    actor, each waiting on the other: a lock held across a wait for its next taker.

What misleads
    The waiting call looks like a wait on a thread pool or a slow load (``Future.result``); the
    loader looks like plain lock contention. Neither thread names the other: only the objects
    do - the Future the loader holds is the one ``refresh`` waits on, and the lock the loader
    waits to take is the one ``refresh`` holds (the same ``self``, the same ``with`` expression).

Expected diagnosis
    ``lock-order-deadlock`` in ModelCache: MainThread waits in Future.result inside ``with
    self._mu:``; loader holds that Future and waits at ``with self._mu:``. Fix: leave the lock
    before waiting on the Future.
"""

import os
import queue
import threading
from concurrent.futures import Future

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "lock-order-deadlock",
    "culprits": [{"class_name": "ModelCache", "rank": None}],
    "notes": "ModelCache.refresh holds self._mu across Future.result(); the loader thread holds that "
    "Future and waits at `with self._mu:` before set_result.",
}


@ray.remote(num_cpus=0.25)
class ModelCache:
    def __init__(self):
        self._mu = threading.Lock()
        self._requests: queue.Queue = queue.Queue()
        self._weights: dict = {}
        threading.Thread(target=self._loader, name="loader", daemon=True).start()

    def _loader(self) -> None:
        while True:
            name, fut = self._requests.get()
            blob = f"weights-of-{name}".encode()
            with self._mu:
                self._weights[name] = blob
            fut.set_result(len(blob))

    def refresh(self, name: str) -> int:
        with self._mu:
            fut: Future = Future()
            self._requests.put((name, fut))
            return fut.result()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cache = ModelCache.remote()
    ray.get(cache.__ray_ready__.remote())
    refreshed = cache.refresh.remote("policy-v2")
    print("READY: refreshing policy-v2", flush=True)
    print(ray.get(refreshed), flush=True)


if __name__ == "__main__":
    main()
