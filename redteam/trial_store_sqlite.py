"""A trial-store actor left a SQLite write transaction open; a reporter waits in SQLite's busy handler (timeout 1 h).

Scenario: the sweep keeps trial rows in one SQLite file (the Optuna/MLflow-style local backend).
TrialStore.start_trial opens `BEGIN IMMEDIATE`, inserts the trial row and returns, meaning to
commit in `finish_trial()` with the final metric (one transaction per trial). The driver then
asks MetricsReporter (another actor, another connection with `timeout=3600`) to record the
trial's first metrics: its INSERT needs the write lock TrialStore's open transaction holds, so
sqlite3 sleeps and retries inside its busy handler (C code, sub-second sleeps, near 0 % CPU) for up
to an hour. TrialStore is idle; the driver would call finish_trial only after the report returns.

Mechanism: a database write lock (SQLite RESERVED lock = POSIX fcntl byte-range locks on the db
file, visible in /proc/locks) held by an idle sibling's open transaction; the waiter is in a long
busy-wait inside one C call.
Truth: culprit TrialStore (its transaction stays open across calls); MetricsReporter and the
driver are victims. Fix: commit in start_trial (short transactions), or report through the same
connection; a small busy timeout that raises.
"""
import os
import sqlite3
import tempfile

import ray


@ray.remote(num_cpus=0.1)
class TrialStore:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path, isolation_level=None)
        self.db.execute("CREATE TABLE IF NOT EXISTS trials (id INTEGER PRIMARY KEY, lr REAL, score REAL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS metrics (trial INTEGER, step INTEGER, loss REAL)")

    def start_trial(self, trial_id: int, lr: float) -> int:
        self.db.execute("BEGIN IMMEDIATE")
        self.db.execute("INSERT INTO trials (id, lr) VALUES (?, ?)", (trial_id, lr))
        return trial_id

    def finish_trial(self, trial_id: int, score: float) -> None:
        self.db.execute("UPDATE trials SET score = ? WHERE id = ?", (score, trial_id))
        self.db.execute("COMMIT")


@ray.remote(num_cpus=0.1)
class MetricsReporter:
    def __init__(self, path: str):
        self.db = sqlite3.connect(path, timeout=3600)

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
    trial = ray.get(store.start_trial.remote(1, 3e-4))
    ref = reporter.report.remote(trial, [2.3, 1.9, 1.7])
    print("READY reporting", flush=True)
    print(ray.get(ref))
    ray.get(store.finish_trial.remote(trial, 0.81))


if __name__ == "__main__":
    main()
