"""Healthy: a feature refresher ticks every 45 s with `stop.wait(timeout=45)`; its only thread is in that timed wait.

Scenario: FeatureRefresher.run loops `for tick in range(4): if self.stop.wait(timeout=45): break;
self._refresh()` — the standard stoppable-ticker idiom (an Event used as an interruptible sleep).
`_refresh` recomputes a small feature table in well under a second. Nobody calls `stop()`; the
loop ends after 4 ticks (~3 min). Nothing is logged. The method's thread is the process's only
job thread, almost always in `Event.wait` → `Condition.wait` with a timeout.

Mechanism (none: healthy): a timed wait used as a sleep; it returns when its timeout ends.
Truth: no hang. A right diagnosis says no-hang or inconclusive; `event-never-set` (nothing will
set it) is a false hang — nothing needs to set it.
"""
# redteam-settle: 25
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class FeatureRefresher:
    def __init__(self):
        self.stop_event = threading.Event()
        self.table: dict[int, float] = {}

    def _refresh(self) -> None:
        self.table = {k: (k * 2654435761 % 1000) / 1000 for k in range(20000)}

    def run(self, ticks: int, period_s: float) -> int:
        for _ in range(ticks):
            if self.stop_event.wait(timeout=period_s):
                break
            self._refresh()
        return len(self.table)

    def stop(self) -> None:
        self.stop_event.set()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    r = FeatureRefresher.remote()
    ref = r.run.remote(4, 45.0)
    print("READY refreshing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
