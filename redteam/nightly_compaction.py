"""Healthy: a compaction actor works in short bursts separated by long silent sleeps.

Scenario: Compactor.run performs 6 rounds; each round compresses a few MB (about a second of
work) then sleeps 40 s until the next window ("off-peak every N seconds"). No logging, no Ray
calls, the driver waits in ray.get. Nearly every sample shows `time.sleep` in the same loop line;
the round counter moves once every 40 s.
Truth: no hang (scheduled work; the next burst comes at most 40 s later).
"""
# redteam-settle: 25
import os
import time
import zlib

import ray


@ray.remote(num_cpus=0.5)
class Compactor:
    def run(self, rounds: int, pause_s: float) -> int:
        total = 0
        for _ in range(rounds):
            blob = os.urandom(1 << 20) * 4
            total += len(zlib.compress(blob, 9))
            time.sleep(pause_s)
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    c = Compactor.remote()
    ref = c.run.remote(6, 40.0)
    print("READY compacting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
