"""Healthy: a method waits in queue.Queue.get(timeout=240) for an optional result that never comes, then falls back.

Scenario: a Ranker actor asks a "personalisation" side channel for user features: `fetch()`
waits `self.replies.get(timeout=240)` on a queue that only a `push_features` call (from an external
service, not running today) would fill; after the timeout it ranks with default features.
Mechanism: the method's thread is idle in `Queue.get` → `Condition.wait(remaining)`; no thread or
process puts into the queue; nothing is logged after "waiting up to 240 s for user features".
Truth: healthy (no culprit): `get` raises `queue.Empty` after 240 s, the method falls back and
returns. A hang verdict is wrong.
"""
# redteam-settle: 25
import os
import queue

import ray


@ray.remote(num_cpus=1, max_concurrency=2)
class Ranker:
    def __init__(self):
        self.replies = queue.Queue()

    def push_features(self, feats):
        self.replies.put(feats)

    def rank(self, items: list) -> list:
        print("waiting up to 240 s for user features", flush=True)
        try:
            feats = self.replies.get(timeout=240)
        except queue.Empty:
            feats = {}
        return sorted(items, key=lambda x: feats.get(x, 0))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    r = Ranker.remote()
    ref = r.rank.remote(["a", "b", "c"])
    print("READY: driver -> Ranker.rank (Queue.get(timeout=240), falls back)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
