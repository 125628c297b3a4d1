"""A lookup that spin-waits on a ready flag whose setter thread died: a real spin that never ends.

Scenario
    A ``FeatureCache`` actor loads its table on a background thread at start-up and sets
    ``self._ready = True`` when done; ``lookup`` spin-waits for the flag ("the load takes
    milliseconds, a spin is cheaper than a condition variable") and counts its spins for a
    metric. The driver calls ``lookup`` and waits in ``ray.get``.

Mechanism
    The loader thread raises (the table's schema lacks the ``"rows"`` key it reads) and dies
    before setting the flag; the exception is only in the actor's log. ``lookup`` runs
    ``while not self._ready: spins += 1`` forever at 100 % CPU: its loop tests ``self._ready``,
    which nothing in the loop changes, and no other thread of the process is left to change it.

What misleads
    The thread is busy and a local (``spins``) advances between samples: it looks like work.
    Wrong: the counter is not what the loop tests; the loop's exit depends only on a flag that no
    live thread can set.

Expected diagnosis
    ``hang``, ``busy-loop``: FeatureCache's ``lookup`` thread spins on ``while not self._ready``
    in every sample; the driver waits on it. Culprit: FeatureCache.
"""

import os
import threading

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "busy-loop",
    "culprits": [{"class_name": "FeatureCache", "rank": None}],
    "ready": "waiting for it",
    "notes": "FeatureCache.lookup spins `while not self._ready: spins += 1`; the loader thread that sets "
    "_ready died of a KeyError; the driver waits in ray.get on lookup.",
}


def read_table(path: str) -> dict:
    schema = {"columns": ["user", "score"], "num_rows": 3}
    return {"rows": [[i, i * 0.5] for i in range(schema["rows"])]}  # KeyError: 'rows'


@ray.remote(num_cpus=0.1)
class FeatureCache:
    def __init__(self, path: str):
        self._ready = False
        self._table: dict = {}
        self.spins_total = 0
        threading.Thread(target=self._load, args=(path,), name="table-loader", daemon=True).start()

    def _load(self, path: str) -> None:
        self._table = read_table(path)
        self._ready = True

    def lookup(self, keys: list) -> list:
        if not self._ready:
            print("lookup: table not loaded yet, waiting for it", flush=True)
        spins = 0
        while not self._ready:
            spins += 1
        self.spins_total += spins
        return [self._table["rows"][k] for k in keys]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cache = FeatureCache.remote("s3://features/users.parquet")
    ref = cache.lookup.remote([0, 1, 2])
    print(ray.get(ref), flush=True)


if __name__ == "__main__":
    main()
