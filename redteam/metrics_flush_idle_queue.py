"""Healthy: a metrics shipper waits on its event queue with `get(timeout=40)` and flushes on every timeout; no events come.

Scenario: MetricsShipper.run drains `self.events` (a queue.Queue) in the standard batching loop
`try: ev = self.events.get(timeout=40) except queue.Empty: self._flush(); ...` and returns after 4
flushes (~3 min). The training loop that would `record()` events is paused (nothing is queued),
which is normal for this shipper: it flushes an empty batch on each timeout. Its thread is the
only job thread, in `Queue.get` → `Condition.wait` with a timeout. Silent.

Mechanism (none: healthy): a timed queue get used as a flush timer.
Truth: no hang. A right diagnosis says no-hang or inconclusive; queue-get-wait / producer-gone /
idle-producer as a hang is a false hang (the get returns by itself every 40 s).
"""
# redteam-settle: 25
import os
import queue

import ray


@ray.remote(num_cpus=0.1)
class MetricsShipper:
    def __init__(self):
        self.events: queue.Queue = queue.Queue()
        self.flushes = 0
        self.batch: list = []

    def record(self, ev: dict) -> None:
        self.events.put(ev)

    def _flush(self) -> None:
        self.flushes += 1
        self.batch.clear()

    def run(self, flushes: int, period_s: float) -> int:
        while self.flushes < flushes:
            try:
                self.batch.append(self.events.get(timeout=period_s))
            except queue.Empty:
                self._flush()
        return self.flushes


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    s = MetricsShipper.remote()
    ref = s.run.remote(4, 40.0)
    print("READY shipping", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
