"""Healthy: a service waits for a warm-up window armed with threading.Timer; the timer fires after ~2 min.

Scenario: WarmStart.start arms `threading.Timer(120, self.ready.set)` (the upstream cache
refreshes every two minutes; starting earlier would read stale entries) and waits on
`self.ready.wait()`; then it serves a few lookups and returns. Nothing is logged meanwhile. The
only other thread is the Timer, inside the standard library (`Timer.run` → `Event.wait(120)`), no
job code on its stack.
Truth: no hang (the Timer thread is alive and will set the event when its interval ends).
"""
# redteam-settle: 25
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class WarmStart:
    def __init__(self):
        self.ready = threading.Event()

    def start(self, delay_s: float) -> int:
        threading.Timer(delay_s, self.ready.set).start()
        self.ready.wait()
        return sum(range(1000))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = WarmStart.remote()
    ref = w.start.remote(120.0)
    print("READY warming up", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
