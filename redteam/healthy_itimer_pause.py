"""Healthy: a nightly-export task sleeps in signal.pause() until an interval timer (~300 s) fires SIGALRM.

Scenario: export_when_window_opens waits for the storage provider's off-peak window. Instead of
time.sleep it arms `signal.setitimer(ITIMER_REAL, delay)` with a SIGALRM handler that sets a flag,
and calls `signal.pause()` (so that a SIGTERM from the operator also wakes it). After the timer fires
it exports 4 chunks, logging each, and returns.
Mechanism: the task's only thread is in `signal.pause()` (a native wait with no timeout argument);
the wake-up is a kernel interval timer of the process itself, armed before, which fires after ~300 s.
No other process of the job is busy; the driver in ray.get.
Truth: healthy (no culprit): the task returns ~300 s after READY. A tool may say inconclusive; a hang
verdict is wrong.
"""
import os
import signal
import time

import ray


@ray.remote(num_cpus=1)
def export_when_window_opens(delay_s):
    fired = {"at": None}

    def on_alarm(signum, frame):
        fired["at"] = time.time()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, delay_s)
    print(f"waiting {delay_s:.0f} s for the off-peak window", flush=True)
    while fired["at"] is None:
        signal.pause()
    for chunk in range(4):
        time.sleep(0.5)
        print(f"exported chunk {chunk}", flush=True)
    return "exported"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = export_when_window_opens.remote(300.0)
    print("READY: driver -> export_when_window_opens (signal.pause until its itimer fires)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
