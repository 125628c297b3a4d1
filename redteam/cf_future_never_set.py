"""An actor waits on a concurrent.futures.Future whose completion callback never runs.

Mechanism: RequestBatcher.submit creates a Future per request and parks it in self.pending;
a flush thread completes futures when the batch reaches 8. Only 5 requests ever come, and there
is no flush-on-timeout, so fut.result() (no timeout) waits forever in Condition.wait. Driver in
ray.get. Truth: culprit RequestBatcher (its batching never flushes a partial batch).
"""
import concurrent.futures as cf
import os
import threading
import time

import ray


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
