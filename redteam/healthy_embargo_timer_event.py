"""Healthy: a publish call waits on an Event that a threading.Timer sets when an embargo ends, minutes later.

Scenario: a ResultsPublisher actor must not publish benchmark results before an embargo time
(set by the team: 7 minutes after the run). Its constructor starts `threading.Timer(420,
self.embargo_over.set)`. The driver calls `publish()` at once; it waits on `self.embargo_over`
(a threading.Event, no timeout), then writes the results. For those minutes: the actor's main
thread waits on the Event, the Timer thread sits in its own `Event.wait(420)` (a timed wait),
no other thread runs, nothing is logged, nothing finishes.
Mechanism (none: healthy): an Event whose setter is a timer thread in a timed wait that ends by
itself (a scheduled release).
Truth: no hang. A right diagnosis is no-hang or inconclusive; event-never-set / a hang naming
ResultsPublisher is a false hang.
"""
# redteam-settle: 25
import os
import threading

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class ResultsPublisher:
    def __init__(self, embargo_s: float):
        self.embargo_over = threading.Event()
        self.timer = threading.Timer(embargo_s, self.embargo_over.set)
        self.timer.name = "embargo-timer"
        self.timer.daemon = True
        self.timer.start()

    def publish(self, results: dict) -> str:
        self.embargo_over.wait()
        return f"published {len(results)} results"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    pub = ResultsPublisher.remote(420.0)
    ref = pub.publish.remote({"mmlu": 0.61, "gsm8k": 0.44})
    print("READY embargoed", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
