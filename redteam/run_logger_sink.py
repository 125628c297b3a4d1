"""A tracker logs inside its critical section; its log handler ships each line to the tracker itself.

Scenario: RunTracker (threaded, max_concurrency=2) records steps under `self._lock` and logs a
warning inside that `with` block. The run's logger has a handler that forwards every record to
the run's tracker actor with `ray.get(tracker.append.remote(line))` — attached by the driver with
the tracker's own handle. `append` runs on the tracker's second thread and blocks at
`with self._lock:`, held by `step`, which waits in the handler's ray.get for `append`.

Mechanism: a lock held across a remote call that comes back to the same actor, hidden inside a
logging handler (`Handler.handle` holds the handler's lock too: every other logger of the process
would block behind it).
Truth: culprit RunTracker (step holds `_lock` while its logging handler waits on its own
`append`); the driver is a victim. Fix: log outside the lock, or make the handler
non-blocking (queue the line, ship from a thread).
"""
import logging
import os
import threading

import ray


class ActorLogHandler(logging.Handler):
    def __init__(self, sink):
        super().__init__()
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        ray.get(self.sink.append.remote(self.format(record)))


@ray.remote(num_cpus=0.1, max_concurrency=2)
class RunTracker:
    def __init__(self):
        self._lock = threading.Lock()
        self.lines: list[str] = []
        self.steps: dict[int, float] = {}
        self.log = logging.getLogger("run")
        self.log.propagate = False

    def attach(self, sink) -> None:
        self.log.addHandler(ActorLogHandler(sink))

    def append(self, line: str) -> int:
        with self._lock:
            self.lines.append(line)
            return len(self.lines)

    def step(self, i: int, loss: float) -> int:
        with self._lock:
            self.steps[i] = loss
            if loss > 1.0:
                self.log.warning("step %d: loss %.2f above 1.0", i, loss)
            return len(self.steps)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tracker = RunTracker.remote()
    ray.get(tracker.attach.remote(tracker))
    print(ray.get([tracker.step.remote(i, 0.5) for i in range(3)]), flush=True)
    ref = tracker.step.remote(3, 1.7)
    print("READY tracking", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
