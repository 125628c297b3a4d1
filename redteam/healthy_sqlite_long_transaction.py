"""A trial-store actor runs one long write transaction (a bulk load); a reporter waits in SQLite's busy handler meanwhile.

Scenario: TrialStore.bulk_load opens `BEGIN IMMEDIATE` and inserts 120 rows fetched from a slow
upstream (0.5 s a row), then commits: about a minute with SQLite's RESERVED lock held. The driver
starts MetricsReporter.report (another connection, timeout=600) at the same time: its INSERT
retries in SQLite's busy handler until the load commits, then goes through.

Mechanism: a database write lock (POSIX locks on the db file, /proc/locks) held by a sibling that is
working in its transaction (its loop moves); the waiter is in a busy-wait inside one C call.
Truth: healthy (no-hang, or inconclusive while the load runs); never a hang.
"""
# redteam-settle: 25
import os
import sqlite3
import tempfile
import time

import ray


@ray.remote(num_cpus=0.1)
class TrialStore:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("CREATE TABLE IF NOT EXISTS trials (id INTEGER PRIMARY KEY, lr REAL, score REAL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS metrics (trial INTEGER, step INTEGER, loss REAL)")

    def bulk_load(self, rows: int) -> int:
        self.db.execute("BEGIN IMMEDIATE")
        for trial_id in range(rows):
            lr = fetch_trial(trial_id)
            self.db.execute("INSERT INTO trials (id, lr) VALUES (?, ?)", (trial_id, lr))
        self.db.execute("COMMIT")
        return rows


def fetch_trial(trial_id: int) -> float:
    time.sleep(0.5)  # a slow upstream
    return 1e-4 * (1 + trial_id % 7)


@ray.remote(num_cpus=0.1)
class MetricsReporter:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path, timeout=600)

    def report(self, trial_id: int, losses: list[float]) -> int:
        with self.db:
            self.db.executemany("INSERT INTO metrics VALUES (?, ?, ?)",
                                [(trial_id, i, v) for i, v in enumerate(losses)])
        return len(losses)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="sweep_"), "trials.db")
    store = TrialStore.remote(path)
    reporter = MetricsReporter.remote(path)
    ray.get([store.__ray_ready__.remote(), reporter.__ray_ready__.remote()])
    loaded = store.bulk_load.remote(120)
    time.sleep(1.0)
    ref = reporter.report.remote(1, [2.3, 1.9, 1.7])
    print("READY reporting", flush=True)
    print(ray.get(ref), ray.get(loaded))


if __name__ == "__main__":
    main()
