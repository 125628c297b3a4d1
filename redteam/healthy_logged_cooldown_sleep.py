"""Healthy: a task logs a cooldown and sleeps in one time.sleep(240) before its next upload.

Scenario: `publish_shards` uploads a shard, logs "rate limit: cooling down 240 s before shard 1",
and calls `time.sleep(240)` (the storage provider's documented cooldown), then uploads the next.
Mechanism: the task's only thread is idle in one `time.sleep` for four minutes; no CPU, no I/O, no
other process works; the log said why and for how long. Driver in ray.get.
Truth: healthy (no culprit): the sleep is bounded and ends by itself 240 s after the log line.
A hang verdict is wrong.
"""
# redteam-settle: 25
import os
import time

import ray


@ray.remote(num_cpus=1)
def publish_shards(n: int) -> int:
    for shard in range(n):
        print(f"uploaded shard {shard}", flush=True)
        if shard + 1 < n:
            print(f"rate limit: cooling down 240 s before shard {shard + 1}", flush=True)
            time.sleep(240)
    return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = publish_shards.remote(3)
    print("READY: driver -> publish_shards (time.sleep(240) cooldown)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
