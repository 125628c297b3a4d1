"""Healthy: a metrics reporter retries 'database is locked' with exponential back-off while a bulk load holds the write lock.

Scenario: a trial-results database (SQLite) shared by two actors. The Loader imports a sweep's
history in one write transaction: ~4 minutes of batched INSERTs with a short pause between
batches (it parses each file first). The Reporter writes with `timeout=0` (fail fast) and catches
`sqlite3.OperationalError: database is locked`, sleeping 1, 2, 4, ... 30 s between attempts
(capped) and logging nothing. Snapshot: the Reporter in time.sleep inside its retry loop, the
Loader between executemany calls, /proc/locks showing the Loader's RESERVED lock.

Mechanism: a Python-level back-off retry on a database lock whose holder is alive and writing
(its journal grows): the retry succeeds once the load commits.
Truth: healthy (no hang); the report lands ~4 min in. A right answer is no-hang, or inconclusive
naming the Loader's transaction; "hang" is a false hang.
"""
import os
import sqlite3
import tempfile
import time

import ray


@ray.remote(num_cpus=0.25)
class Loader:
    def load(self, path, seconds):
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("CREATE TABLE IF NOT EXISTS results (trial TEXT, step INT, metric REAL)")
        db.execute("BEGIN IMMEDIATE")
        t0, n = time.monotonic(), 0
        while time.monotonic() - t0 < seconds:
            rows = [(f"t{n % 97}", n + i, (n + i) * 0.001) for i in range(2000)]
            db.executemany("INSERT INTO results VALUES (?, ?, ?)", rows)
            n += len(rows)
            time.sleep(0.5)
        db.execute("COMMIT")
        return n


@ray.remote(num_cpus=0.25)
class Reporter:
    def report(self, path, trial, metric):
        delay = 1.0
        while True:
            try:
                db = sqlite3.connect(path, timeout=0, isolation_level=None)
                db.execute("INSERT INTO results VALUES (?, ?, ?)", (trial, -1, metric))
                db.close()
                return trial
            except sqlite3.OperationalError:
                time.sleep(delay)
                delay = min(delay * 2, 30.0)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt11_backoff_"), "results.db")
    sqlite3.connect(path).execute("CREATE TABLE results (trial TEXT, step INT, metric REAL)").connection.commit()
    loader, reporter = Loader.remote(), Reporter.remote()
    lref = loader.load.remote(path, 240)
    time.sleep(3)
    rref = reporter.report.remote(path, "trial_0042", 0.913)
    time.sleep(5)
    print("READY: Reporter backs off on 'database is locked' while Loader bulk-loads for ~4 min", flush=True)
    print(ray.get([lref, rref]))


if __name__ == "__main__":
    main()
