"""Healthy: a downloader in time.sleep-based backoff, logging progress every 5 s, no task finishes.

Mechanism: Fetcher.fetch_all retries a 'rate-limited' fetch with 5 s sleeps, printing
'attempt N (waiting for quota)' each time, succeeding after 30 attempts (~150 s). Truth: no hang
(slow; progress only in its log lines).
"""
import os
import time

import ray


@ray.remote(num_cpus=0.1)
class Fetcher:
    def fetch_all(self):
        for attempt in range(30):
            print(f"attempt {attempt} (waiting for quota)", flush=True)
            time.sleep(5)
        return "done"

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    f = Fetcher.remote()
    print("READY: Fetcher in 5s backoff, 30 attempts", flush=True)
    print(ray.get(f.fetch_all.remote()))

if __name__ == "__main__":
    main()
