"""A threaded actor keeps its "weights ready" Event in threading.local: the loader sets another thread's.

Scenario: PolicyServer (max_concurrency=4) keeps per-request scratch state in `self._tls =
threading.local()`, and a refactor moved the `ready` Event there too (a lazily created property
`self._ready`). load_weights() runs on one executor thread and sets *its* thread's Event; act() runs
on other executor threads, each of which lazily creates a fresh Event and waits on it.
Mechanism: the act() threads are in `Event.wait()` (no timeout) on Events that exist only in their own
thread-local storage: no other thread can reach them, so nothing can ever set them. load_weights
finished (its Event set, unreachable to the others). Driver in ray.get of the act calls.
Truth: culprit PolicyServer._ready (the Event is per thread); fix: one instance attribute
`self.ready = threading.Event()` created in __init__.
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.5, max_concurrency=4)
class PolicyServer:
    def __init__(self):
        self._tls = threading.local()
        self.weights = None

    @property
    def _ready(self):
        ev = getattr(self._tls, "ready", None)
        if ev is None:
            ev = self._tls.ready = threading.Event()
        return ev

    def load_weights(self):
        time.sleep(1.0)
        self.weights = [0.1] * 16
        self._ready.set()
        print("weights loaded on", threading.current_thread().name, flush=True)
        return True

    def act(self, obs):
        self._ready.wait()
        return sum(w * obs for w in self.weights)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    srv = PolicyServer.remote()
    acts = [srv.act.remote(float(i)) for i in range(2)]
    time.sleep(0.5)
    print("loaded", ray.get(srv.load_weights.remote()), flush=True)
    print("READY: driver -> PolicyServer.act (waits on a thread-local Event nobody else can set)", flush=True)
    print("actions", ray.get(acts))


if __name__ == "__main__":
    main()
