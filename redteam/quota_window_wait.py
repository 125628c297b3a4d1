"""Healthy: an export task sleeps once until the next API quota window (~100 s away), then uploads.

Scenario: export_batch computes how long until its quota window opens (the provider resets
quotas on the minute; here a fixed 100 s from start) and makes one `time.sleep(remaining)` call,
then does its work and returns. One sleep call, not a loop: nothing is polled, no counter moves,
no log line. The driver waits in ray.get.
Truth: no hang (a single timed sleep that ends).
"""
# redteam-settle: 25
import os
import time

import ray


@ray.remote(num_cpus=0.5)
def export_batch(window_opens_at: float, rows: int) -> int:
    remaining = window_opens_at - time.time()
    if remaining > 0:
        time.sleep(remaining)
    return sum(i % 7 for i in range(rows))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = export_batch.remote(time.time() + 100.0, 10_000)
    print("READY exporting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
