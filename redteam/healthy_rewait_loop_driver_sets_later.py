"""Healthy: a lookup re-waits on an Event in a logging loop while the driver computes, then sets it.

Scenario: FeatureIndex (threaded, max_concurrency=2) serves lookups once the driver has published
the feature table: `lookup()` loops `while not self.ready.wait(timeout=5): print("waiting for the
table")` and `publish(table)` stores the table and sets `self.ready`. The driver first starts the
lookup (a warm-up request), then builds the table itself: ~3 minutes of silent numpy work in the
driver process, then `ray.get(idx.publish.remote(table))` and `ray.get(lookup)`.
Mechanism: the actor's only job thread is in a timed wait whose loop only logs (a re-wait, as
untimed as `ready.wait()`), no other thread of the actor runs job code, no call is queued on it;
the setter is a call the driver makes later, and the driver is busy in job code (its stack moves,
it uses a CPU).
Truth: healthy (no culprit): the driver publishes, the wait returns. A hang verdict is wrong.
"""
import os
import threading
import time

import numpy as np
import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class FeatureIndex:
    def __init__(self):
        self.ready = threading.Event()
        self.table = None

    def lookup(self, key):
        while not self.ready.wait(timeout=5):
            print("waiting for the table", flush=True)
        return float(self.table[key % len(self.table)])

    def publish(self, table):
        self.table = table
        self.ready.set()
        return len(table)


def build_table(rounds):
    rng = np.random.default_rng(1)
    acc = np.zeros(400)
    for _ in range(rounds):
        a = rng.standard_normal((400, 400))
        acc += (a @ a.T).sum(axis=0)
    return acc


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    idx = FeatureIndex.remote()
    ref = idx.lookup.remote(17)
    time.sleep(2)
    print("READY: driver builds the table (numpy, minutes) while FeatureIndex.lookup re-waits", flush=True)
    table = build_table(15000)
    print(ray.get(idx.publish.remote(table)), ray.get(ref))


if __name__ == "__main__":
    main()
