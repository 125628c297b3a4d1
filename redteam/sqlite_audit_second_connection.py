"""A results store writes an audit row through a second SQLite connection while its own write transaction is open.

Scenario: a Tune-like results store actor. record() opens a write transaction on its main
connection (`BEGIN IMMEDIATE`, insert the trial's metrics) and, before committing, calls
`_audit()`, a helper written elsewhere that opens its *own* sqlite3 connection to the same file
(timeout=3600 s, "the DB may be busy under load") and inserts an audit row. The write lock of the
database belongs to the first connection of the same thread, which cannot commit until _audit
returns: the second connection spins in SQLite's busy handler (sleep, retry) for an hour.
The driver waits on record().

Mechanism: a lock self-deadlock through SQLite: the waiter and the holder of the database write
lock are two connections of one process and one thread (the holder's frame is the waiter's caller).
Truth: hang; culprit ResultsStore._audit's `conn.execute("INSERT INTO audit ...")` (called from
record() while record's transaction holds the lock). Fix: write the audit row on the same
connection/transaction, or after commit.
"""
import os
import sqlite3
import tempfile
import time

import ray


@ray.remote(num_cpus=0.25)
class ResultsStore:
    def __init__(self, path):
        self.path = path
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("CREATE TABLE IF NOT EXISTS metrics (trial TEXT, step INT, loss REAL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS audit (trial TEXT, what TEXT)")

    def _audit(self, trial, what):
        conn = sqlite3.connect(self.path, timeout=3600, isolation_level=None)
        conn.execute("INSERT INTO audit VALUES (?, ?)", (trial, what))
        conn.close()

    def record(self, trial, rows):
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO metrics VALUES (?, ?, ?)", [(trial, s, loss) for s, loss in rows])
        self._audit(trial, f"recorded {len(rows)} rows")
        self.db.execute("COMMIT")
        return len(rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt11_sqlite_"), "results.db")
    store = ResultsStore.remote(path)
    ref = store.record.remote("trial_0001", [(i, 1.0 / (i + 1)) for i in range(100)])
    time.sleep(4)
    print("READY: ResultsStore.record in _audit's second connection (busy handler)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
