"""Healthy: a report actor runs one multi-minute SQLite query — a single C call, no Python line moves.

Scenario: a ReportBuilder actor computes a nightly aggregate with one recursive-CTE query in an
in-memory SQLite database (`conn.execute(...).fetchone()` over ~500 M generated rows). The whole
work is one call into the sqlite3 C library: py-spy shows the same Python line (`execute`) for
minutes, no I/O, no log line; the driver waits in ray.get. The process burns ~100 % of a core.

Mechanism (none: healthy): one long native call that computes (CPU-bound, GIL held inside the C
call's loop), with a bounded amount of work.
Truth: no hang (the query finishes in a few minutes). A right diagnosis is no-hang or
inconclusive naming ReportBuilder's query; a hang (stuck native call / db lock) is a false hang.
"""
# redteam-settle: 25
import os
import sqlite3

import ray


@ray.remote(num_cpus=1)
class ReportBuilder:
    def build(self, rows):
        conn = sqlite3.connect(":memory:")
        q = ("WITH RECURSIVE cnt(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM cnt LIMIT ?) "
             "SELECT count(*), sum(x % 7), max(x % 1009) FROM cnt")
        return conn.execute(q, (rows,)).fetchone()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    b = ReportBuilder.remote()
    ray.get(b.__ray_ready__.remote())
    ref = b.build.remote(500_000_000)
    print("READY: driver -> ReportBuilder.build (one SQLite query, minutes in C)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
