"""Healthy: a monitor polls an indexer's progress counter while the indexer's own thread works.

Scenario
    An ``Indexer`` actor indexes documents in a background thread (one every 0.3 s, a sleep
    standing in for I/O) and counts them; ``Monitor.wait_until`` polls
    ``ray.get(indexer.progress.remote())`` every 0.5 s until the count reaches its target (about
    two minutes away). The driver waits on the monitor.

Mechanism
    No task finishes but the poll's own ``progress()`` rounds; the monitor sleeps at one line of
    its loop in every sample. The answer changes each round: the indexer's thread advances the
    counter between the rounds.

What misleads
    It has the shape of a poll that never ends (a sleeping loop repeating one call). What tells it
    apart: the polled process is not idle, a thread of its own job code works on what the poll
    reads, so the rounds may be carrying progress.

Expected diagnosis
    Not a hang: no-hang (the rounds finish while the polled actor works), or inconclusive with what
    was seen. Never a hang.
"""

import os
import threading
import time

import ray

EXPECTED = {
    "verdict": "no-hang",
    "verdicts": ["no-hang", "inconclusive"],
    "pattern": None,
    "culprits": [],
    "notes": "healthy: Monitor polls Indexer.progress while the Indexer's own thread advances the count.",
}


@ray.remote(num_cpus=0.1)
class Indexer:
    def __init__(self):
        self.done = 0
        threading.Thread(target=self._work, daemon=True, name="indexer").start()

    def _work(self):
        while True:
            time.sleep(0.3)  # fetch one document
            self.done += 1

    def progress(self):
        return self.done


@ray.remote(num_cpus=0.1)
class Monitor:
    def wait_until(self, indexer, target):
        while ray.get(indexer.progress.remote()) < target:
            time.sleep(0.5)
        return target


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    indexer, monitor = Indexer.remote(), Monitor.remote()
    print("READY: Monitor polls Indexer.progress; the indexer thread advances it", flush=True)
    print(ray.get(monitor.wait_until.remote(indexer, 400)))


if __name__ == "__main__":
    main()
