#!/usr/bin/env python3
"""The analysis at scale: a 2,000-rank / 250-node hang, built from a recorded real capture.

tests/scale_capture.py copies the ranks of tests/data/cases/gloo_skipped_allreduce with new pids,
ranks, actor, task and node ids (1,998 blocked in one all-reduce, 2 that skipped it). This times,
REPEAT times each, on that folder: loading it, the analysis (`pipeline.reanalyse`: matching,
graph, root cause, verdict) and report.md; peak Python memory of one load + analysis + render
(tracemalloc, a separate run: tracing slows it); the report's lines and characters; and writing
the whole output folder. The machine's load average is printed beside the figures.
Not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from scale_capture import build  # noqa: E402

from debug_hang.pipeline import load_capture, reanalyse  # noqa: E402
from debug_hang.report.markdown import render_markdown  # noqa: E402
from debug_hang.report.write import write_outputs  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2000)
    p.add_argument("--nodes", type=int, default=250)
    p.add_argument("--repeat", type=int, default=5, help="timed runs (default 5; medians reported)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = build(Path(tmp) / "capture", args.ranks, args.nodes)
        size_mb = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
        load_s, analyse_s, render_s, write_s = [], [], [], []
        for i in range(args.repeat):
            t0 = time.perf_counter()
            load_capture(folder)
            t1 = time.perf_counter()
            diag = reanalyse(folder)  # loads again: analysis = this minus the load
            t2 = time.perf_counter()
            report = render_markdown(diag)
            t3 = time.perf_counter()
            write_outputs(diag, Path(tmp) / f"out{i}", None)
            t4 = time.perf_counter()
            load_s.append(t1 - t0)
            analyse_s.append(t2 - t1 - (t1 - t0))
            render_s.append(t3 - t2)
            write_s.append(t4 - t3)
            print(f"run {i + 1}: load {t1 - t0:.2f}s analysis {analyse_s[-1]:.2f}s report {t3 - t2:.2f}s "
                  f"write {t4 - t3:.2f}s", file=sys.stderr)
        tracemalloc.start()
        render_markdown(reanalyse(folder))
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        processes = len({(pr.node_id, pr.pid) for pr in diag.collection.processes})
        figures = {
            "processes": processes, "nodes": args.nodes, "stacks": len(diag.collection.processes),
            "capture_mb": round(size_mb, 1), "verdict": diag.verdict,
            "root_cause": diag.causes[0].pattern if diag.causes else None,
            "load_median_s": round(statistics.median(load_s), 3),
            "analysis_median_s": round(statistics.median(analyse_s), 3),
            "load_plus_analysis_median_s": round(statistics.median(a + b for a, b in zip(load_s, analyse_s, strict=True)), 3),
            "report_median_s": round(statistics.median(render_s), 3),
            "write_outputs_median_s": round(statistics.median(write_s), 3),
            "peak_mb": round(peak / 1e6, 1),
            "report_lines": len(report.splitlines()), "report_chars": len(report),
            "loadavg": os.getloadavg()[0],
        }
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        for key, value in figures.items():
            print(f"{key:<28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
