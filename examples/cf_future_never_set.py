"""An actor waits on a concurrent.futures.Future that its flush thread will never complete.

Scenario
    ``RequestBatcher.submit_all(n)`` parks one ``concurrent.futures.Future`` per request in
    ``self.pending`` and waits on each with ``f.result()``. A "flusher" thread completes the
    futures once a batch of 8 is pending. The driver submits 5 requests and waits in ``ray.get``.

Mechanism
    The flusher sleeps 0.5 s and re-checks ``len(self.pending) >= 8`` forever; its only call that
    could complete a future (``set_result``) runs under that test. With 5 pending the test never
    holds, and nothing else can change ``self.pending``: the main thread that appends is the one
    waiting, the actor runs one call at a time and nothing is queued on it, and the driver waits
    on it. There is no flush on a timeout.

What misleads
    A live thread of the actor's own code, idle in ``time.sleep`` in a loop: it looks like the
    setter that will complete the future any moment. ``Future.result`` shows only as
    ``Condition.wait``.

Expected diagnosis
    ``event-never-set``: culprit RequestBatcher; its flusher re-checks a state nothing can change
    (its loop, its guard `len(self.pending) >= 8`, the same line in every sample). Fix: flush a
    partial batch on a timeout; give ``result()`` a timeout.
"""

import concurrent.futures as cf
import os
import threading
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "event-never-set",
    "culprits": [{"class_name": "RequestBatcher", "rank": None}],
    "notes": "main thread in Future.result; the flusher thread sleeps and re-checks len(self.pending) >= 8 "
    "with 5 pending; nothing else can change self.pending.",
}


@ray.remote(num_cpus=0.1)
class RequestBatcher:
    def __init__(self):
        self.pending = []
        self.lock = threading.Lock()
        threading.Thread(target=self._flusher, daemon=True, name="flusher").start()

    def _flusher(self):
        while True:
            with self.lock:
                if len(self.pending) >= 8:
                    for f in self.pending:
                        f.set_result(len(self.pending))
                    self.pending = []
            time.sleep(0.5)

    def submit_all(self, n):
        futs = []
        for _ in range(n):
            f = cf.Future()
            with self.lock:
                self.pending.append(f)
            futs.append(f)
        return [f.result() for f in futs]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    b = RequestBatcher.remote()
    print("READY: driver -> RequestBatcher.submit_all(5) (batch size 8, no partial flush)", flush=True)
    print(ray.get(b.submit_all.remote(5)))


if __name__ == "__main__":
    main()
