"""Simulation task whose SIGALRM metrics flush re-takes the lock the interrupted main thread holds.

Scenario: a long physics-simulation task reports metrics every 0.5 s from a signal handler
(signal.setitimer(ITIMER_REAL) + SIGALRM, "no extra thread needed"). The handler snapshots the
counters under self.lock (a threading.Lock). The main loop updates the counters under the same
lock. Sooner or later the alarm fires while the main thread is inside `with self.lock:`; Python
runs the handler on the main thread, between two bytecodes of the locked region; the handler
blocks on the lock that its own thread holds. The driver waits in ray.get.

Mechanism: self-deadlock through a signal handler (non-reentrant lock taken by a handler that
interrupted the lock's owner, the same thread). py-spy shows the main thread in
_flush_metrics (the handler frame) stacked on top of the step loop frame inside the `with`.
Truth: culprit the simulate task (its SIGALRM handler _flush_metrics waits for self.lock held by
the same thread in _integrate). Fix: never take locks in a signal handler (set a flag / use a
thread), or an RLock at the very least.
"""
import math
import os
import signal
import threading

import ray


class Metrics:
    def __init__(self):
        self.lock = threading.Lock()
        self.counters = {"steps": 0, "energy": 0.0}
        self.flushed: list[dict] = []

    def _flush_metrics(self, signum, frame):
        with self.lock:
            self.flushed.append(dict(self.counters))

    def install(self, period: float) -> None:
        signal.signal(signal.SIGALRM, self._flush_metrics)
        signal.setitimer(signal.ITIMER_REAL, period, period)


def _integrate(metrics: Metrics, state: list[float], dt: float) -> None:
    x, v = state
    for _ in range(2000):
        with metrics.lock:
            a = -math.sin(x)
            v += a * dt
            x += v * dt
            metrics.counters["steps"] += 1
            metrics.counters["energy"] = 0.5 * v * v - math.cos(x)
    state[0], state[1] = x, v


@ray.remote(num_cpus=0.2)
def simulate(seconds: float) -> dict:
    metrics = Metrics()
    metrics.install(0.05)
    state = [1.0, 0.0]
    for _ in range(int(seconds * 1000)):
        _integrate(metrics, state, 1e-4)
    signal.setitimer(signal.ITIMER_REAL, 0)
    return metrics.counters


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = simulate.remote(600)
    print("READY simulation running", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
