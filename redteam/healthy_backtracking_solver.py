"""Healthy: a scheduling task logs its small instances, then solves a big one by silent recursive backtracking.

Scenario: `solve_rosters` assigns shifts with a textbook backtracking search (pure Python, the
N-queens constraint shape: one worker per column, no two on a row or diagonal). It logs each small
instance (n = 6..10, seconds each), then counts the rosters of n = 15 and n = 16, minutes of
silent recursion with no output, no Ray call, no I/O. The driver waits in ray.get.
Mechanism: one CPU-bound Python thread whose stack depth and line change from sample to sample
(`_place` recursing and returning), its locals (`row`, `count`) advancing; nothing else runs.
Truth: healthy (no culprit): the task returns after a few minutes. A hang verdict is wrong.
"""
import os
import time

import ray


def _place(row, n, cols, diag1, diag2):
    if row == n:
        return 1
    count = 0
    for col in range(n):
        if col in cols or (row - col) in diag1 or (row + col) in diag2:
            continue
        cols.add(col)
        diag1.add(row - col)
        diag2.add(row + col)
        count += _place(row + 1, n, cols, diag1, diag2)
        cols.discard(col)
        diag1.discard(row - col)
        diag2.discard(row + col)
    return count


@ray.remote(num_cpus=1)
def solve_rosters(sizes, big):
    out = {}
    for n in sizes:
        t0 = time.time()
        out[n] = _place(0, n, set(), set(), set())
        print(f"n={n}: {out[n]} rosters in {time.time() - t0:.1f} s", flush=True)
    for n in big:
        out[n] = _place(0, n, set(), set(), set())
    print(f"done: {out}", flush=True)
    return out


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = solve_rosters.remote(list(range(6, 11)), [15, 16])
    time.sleep(8)
    print("READY: driver -> solve_rosters (silent recursive search of n=15, 16)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
