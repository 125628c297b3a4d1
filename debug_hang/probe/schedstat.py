"""How much of the sampling window each thread of a process ran, or was ready to run.

A thread that spins is always runnable: on a CPU, or queued for one. On a loaded node (load 20
on 2 cores) a spinning thread gets ~10 % of a core, so its CPU use alone reads like a wait.
/proc/PID/task/TID/schedstat gives, per thread, the time it ran and the time it waited on a
run queue (nanoseconds): their sum over the window is ~100 % for a spinning thread whatever the
load, and ~0 for one blocked in a wait. Read before the first stack sample and after the last.
"""

from __future__ import annotations

import os

MAX_THREADS = 512  # threads read per process


def thread_times(pid: int) -> dict[int, tuple[int, int]]:
    """{tid: (ns on a CPU, ns waiting for one)} of every thread of `pid` ({} when unreadable)."""
    try:
        tids = [t for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()][:MAX_THREADS]
    except OSError:
        return {}
    times: dict[int, tuple[int, int]] = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as fh:
                fields = fh.read().split()
            times[int(tid)] = (int(fields[0]), int(fields[1]))
        except (OSError, IndexError, ValueError):
            continue
    return times


def runnable(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]],
             window_s: float) -> dict[str, dict[str, float]]:
    """{tid: {"cpu": % of the window on a CPU, "runnable": % on a CPU or queued for one}} of the
    threads alive at both readings."""
    out: dict[str, dict[str, float]] = {}
    span = max(window_s, 1e-3) * 1e9
    for tid, (run1, wait1) in after.items():
        if tid not in before:
            continue
        run0, wait0 = before[tid]
        ran, waited = max(run1 - run0, 0), max(wait1 - wait0, 0)
        out[str(tid)] = {"cpu": round(min(100.0, 100.0 * ran / span), 1),
                         "runnable": round(min(100.0, 100.0 * (ran + waited) / span), 1)}
    return out
