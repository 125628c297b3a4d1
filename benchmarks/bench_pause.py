#!/usr/bin/env python3
"""Measure the pause `py-spy dump` imposes on the process it dumps (default and --nonblocking).

A target process spins in a loop that records the largest gap between iterations; it normally
stays well under a millisecond. The benchmark dumps it N times with each mode and reports the
gaps seen while dumps ran — the time the target was stopped. No Ray needed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from debug_hang.probe.pyspy import find_pyspy  # noqa: E402

TARGET = r"""
import sys, time
gaps = []
last = time.perf_counter()
end = last + float(sys.argv[1])
while True:
    now = time.perf_counter()
    if now - last > 0.002:
        gaps.append("%.6f:%.3f" % (last, (now - last) * 1000))
    last = now
    if now > end:
        break
print(" ".join(map(str, gaps)), flush=True)
"""


def measure(mode: list[str], dumps: int, pyspy: str) -> dict[str, float]:
    duration = 2.0 + dumps * 0.25
    target = subprocess.Popen([sys.executable, "-c", TARGET, str(duration)], stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    walls, windows = [], []
    for _ in range(dumps):
        start = time.perf_counter()  # CLOCK_MONOTONIC: comparable with the target's clock
        subprocess.run([pyspy, "dump", "--pid", str(target.pid), *mode], capture_output=True, check=False, timeout=30)
        end = time.perf_counter()
        walls.append((end - start) * 1000)
        windows.append((start, end))
        time.sleep(0.2)
    out, _ = target.communicate(timeout=60)
    during, outside = [], []
    for item in out.split():
        at, gap = (float(x) for x in item.split(":"))
        (during if any(a <= at <= b for a, b in windows) else outside).append(gap)
    # A dump's pause is the largest gap inside its window; the rest is the machine's own scheduling noise.
    return {"dumps": dumps, "max_pause_during_dump_ms": max(during, default=0.0),
            "median_pause_during_dump_ms": statistics.median(during) if during else 0.0,
            "max_gap_without_dump_ms": max(outside, default=0.0),
            "median_dump_wall_ms": statistics.median(walls)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dumps", type=int, default=20, help="dumps per mode (default 20)")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args()
    pyspy = find_pyspy()
    if pyspy is None:
        print("bench_pause: py-spy not found", file=sys.stderr)
        return 3
    results = {"default (pausing)": measure([], args.dumps, pyspy),
               "--nonblocking": measure(["--nonblocking"], args.dumps, pyspy)}
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"{'mode':<20} {'dumps':>6} {'median pause ms':>16} {'max pause ms':>13} {'max gap w/o dump':>17} {'dump wall ms':>13}")
    for mode, r in results.items():
        print(f"{mode:<20} {r['dumps']:>6} {r['median_pause_during_dump_ms']:>16.1f} {r['max_pause_during_dump_ms']:>13.1f} "
              f"{r['max_gap_without_dump_ms']:>17.1f} {r['median_dump_wall_ms']:>13.1f}")
    print(f"(load average {os.getloadavg()[0]:.1f}; gaps above 2 ms counted; the target's own loop is ~µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
