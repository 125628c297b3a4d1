"""Healthy: a consumer thread waits on a Condition that a producer thread signals only every 30 s.

# redteam-settle: 25
Scenario: IngestBuffer.run(6) starts a `collector` thread that sleeps 30 s between batches
(`time.sleep(30)`, an upstream's flush interval), then appends a batch and `notify()`s, and a
`writer` thread that waits with `self.cond.wait_for(lambda: self.pending)` (no timeout) and
writes each batch. run() joins both. Six batches: about 3 minutes in which, between the signals,
every thread of the job is idle (a Condition wait, a timed sleep, a join).
Mechanism: a slow periodic signal; the wait ends at the next notify.
Truth: healthy (no culprit); the job ends after ~3 min. A hang verdict is wrong.
Driver in ray.get(run).
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1)
class IngestBuffer:
    def __init__(self):
        self.cond = threading.Condition()
        self.pending = []
        self.written = 0

    def _collect(self, n):
        for i in range(n):
            time.sleep(30)
            with self.cond:
                self.pending.append([i] * 100)
                self.cond.notify()

    def _write(self, n):
        while self.written < n:
            with self.cond:
                self.cond.wait_for(lambda: self.pending)
                batch = self.pending.pop(0)
            self.written += 1
            print(f"wrote batch {self.written} ({len(batch)} rows)", flush=True)

    def run(self, n):
        c = threading.Thread(target=self._collect, args=(n,), name="collector")
        w = threading.Thread(target=self._write, args=(n,), name="writer")
        c.start()
        w.start()
        c.join()
        w.join()
        return self.written


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    b = IngestBuffer.remote()
    ref = b.run.remote(6)
    time.sleep(2)
    print("READY: driver -> IngestBuffer.run (batches every 30 s)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
