"""A background refresh thread died holding the lock; the serving method waits on a lock no live thread owns.

Scenario: CatalogService refreshes its index in a background thread every few seconds:
`self._lock.acquire()`, rebuild, `self._lock.release()` — no try/finally. One refresh hits a
malformed entry and raises KeyError: the thread dies (traceback in the worker's .err log) with
the lock still acquired (a threading.Lock has no owner tracking; nothing releases it). The driver's
`lookup` call then waits at `with self._lock:` forever; the only other thread is Ray's.

Mechanism: a lock held by a thread that has exited (acquire without try/finally, exception in the
critical section): no live thread holds it, and the waiter does not hold it either.
Truth: culprit CatalogService's refresh thread (dead: KeyError in `_refresh`, lock never released);
`lookup` and the driver are victims. Not a self-deadlock (the waiting thread never took it). Fix:
`with self._lock:` (or try/finally) in the refresher; surface thread exceptions
(threading.excepthook).
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class CatalogService:
    def __init__(self):
        self._lock = threading.Lock()
        self.index: dict[str, int] = {}
        self.source = [{"sku": "a", "qty": 1}, {"sku": "b", "qty": 2}]
        threading.Thread(target=self._refresh_loop, daemon=True).start()

    def _refresh(self) -> None:
        self._lock.acquire()
        self.index = {row["sku"]: row["qty"] for row in self.source}
        self._lock.release()

    def _refresh_loop(self) -> None:
        while True:
            self._refresh()
            time.sleep(1.0)

    def ingest(self, row: dict) -> int:
        self.source.append(row)
        return len(self.source)

    def lookup(self, sku: str) -> int:
        with self._lock:
            return self.index.get(sku, 0)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    svc = CatalogService.remote()
    print(ray.get(svc.lookup.remote("a")), flush=True)
    ray.get(svc.ingest.remote({"sku": "c"}))  # a partner feed row without "qty"
    time.sleep(3)
    ref = svc.lookup.remote("b")
    print("READY looking up", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
