"""Healthy: a flusher thread's Condition.wait(timeout=240) is its flush interval; the call waits on the flush.

Scenario: a MetricsBuffer actor (max_concurrency=2) buffers metrics and flushes them every 240 s
from a `flusher` thread: `with self.cond: self.cond.wait(timeout=240)`, then flush and set
`self.flushed`. `wait_flushed()` (the driver's call at the end of an epoch) waits on
`self.flushed.wait()` (no timeout) for the next flush. Nobody notifies the condition early.
Mechanism: the call is idle in `Event.wait` with no timeout; the only setter, the flusher thread,
is idle in `Condition.wait` with a 240 s timeout; nothing is logged.
Truth: healthy (no culprit): the flusher's timeout expires ~240 s after start, it flushes, sets the
event, and the call returns. A hang verdict is wrong.
"""
# redteam-settle: 25
import os
import threading

import ray


@ray.remote(num_cpus=1, max_concurrency=2)
class MetricsBuffer:
    def __init__(self):
        self.cond = threading.Condition()
        self.flushed = threading.Event()
        self.rows = []
        threading.Thread(target=self._flusher, name="flusher", daemon=True).start()

    def _flusher(self):
        while True:
            with self.cond:
                self.cond.wait(timeout=240)
                self.rows.clear()
            self.flushed.set()

    def add(self, row):
        with self.cond:
            self.rows.append(row)

    def wait_flushed(self) -> bool:
        return self.flushed.wait()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    m = MetricsBuffer.remote()
    ray.get([m.add.remote(i) for i in range(10)])
    ref = m.wait_flushed.remote()
    print("READY: driver -> MetricsBuffer.wait_flushed (flusher in Condition.wait(timeout=240))", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
