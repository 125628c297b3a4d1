#!/usr/bin/env python3
"""The analysis at scale: a 2,000-rank / 250-node hang, built from a recorded real capture.

tests/scale_capture.py copies the ranks of tests/data/cases/gloo_skipped_allreduce with new pids,
ranks, actor, task and node ids (1,998 blocked in one all-reduce, 2 that skipped it). This times,
REPEAT times each, on that folder: loading it, the analysis (`pipeline.reanalyse`: matching,
graph, root cause, verdict), report.md, graph.svg and report.html (and their sizes); peak Python memory of one load + analysis + render
(tracemalloc, a separate run: tracing slows it); the report's lines and characters; and writing
the whole output folder. The machine's load average is printed beside the figures.

--linearity: the same phases on captures of 250, 500, 1,000, 2,000 and 4,000
processes (8 to a node), then at 250 processes with 20,000, 40,000 and 80,000 more FINISHED
task rows (copies of the recorded ones, new task ids): CPU seconds of each phase (medians of
REPEAT) and their growth per doubling. Exit 1 when a phase grows more than --max-growth per
doubling where the smaller time is at least --floor CPU seconds (below it, fixed costs and the
clock decide the ratio). The cyclic garbage collector is paused while a size is timed: a full
collection runs when the long-lived heap has grown by a quarter, and lands as a 0.1-0.2 s step
in whichever phase crosses that threshold, which says nothing about the phase's own growth.

Exit codes: 0 done (linear), 1 a phase grew faster than linear, 2 bad arguments.
Not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from scale_capture import build  # noqa: E402

from debug_hang import pipeline  # noqa: E402
from debug_hang.analyse.diagnosis import Diagnosis  # noqa: E402
from debug_hang.pipeline import load_capture, reanalyse  # noqa: E402
from debug_hang.report.html import render_html  # noqa: E402
from debug_hang.report.markdown import render_markdown  # noqa: E402
from debug_hang.report.svg import render_svg  # noqa: E402
from debug_hang.report.write import write_outputs  # noqa: E402

PHASES = ("load", "analysis", "render", "svg", "html", "write")
RANKS_PER_NODE = 8


def measure_once(folder: Path, out: Path, cyclic_gc: bool = True) -> tuple[dict[str, tuple[float, float]], Diagnosis, str]:
    """One load, analysis, render and write of `folder`: (wall, CPU) seconds of each phase.
    What is alive before (the last run's diagnosis) is frozen out of the cyclic collector's
    passes, so that each run pays for its own objects only, whatever ran before it. Without
    `cyclic_gc` the collector is paused during the run (--linearity: its full passes come at
    discrete thresholds, a step of 0.1-0.2 s in whichever phase crosses one)."""
    gc.collect()
    gc.freeze()
    if not cyclic_gc:
        gc.disable()
    try:
        return _phases(folder, out)
    finally:
        gc.enable()
        gc.unfreeze()


def _phases(folder: Path, out: Path) -> tuple[dict[str, tuple[float, float]], Diagnosis, str]:
    """The analysis is `reanalyse` minus the load it does itself (timed around `pipeline.load_capture`)."""
    inner: list[tuple[float, float]] = []
    real_load = pipeline.load_capture

    def timed_load(folder: Path) -> pipeline.Capture:
        t = clock()
        try:
            return real_load(folder)
        finally:
            inner.append(minus(clock(), t))

    t0 = clock()
    load_capture(folder)
    t1 = clock()
    pipeline.load_capture = timed_load
    try:
        diag = reanalyse(folder)
    finally:
        pipeline.load_capture = real_load
    t2 = clock()
    report = render_markdown(diag)
    t3 = clock()
    svg = render_svg(diag)
    t4 = clock()
    render_html(diag, svg)
    t5 = clock()
    write_outputs(diag, out, None)
    t6 = clock()
    analysis = minus(minus(t2, t1), inner[0])
    return {"load": minus(t1, t0), "analysis": analysis, "render": minus(t3, t2), "svg": minus(t4, t3),
            "html": minus(t5, t4), "write": minus(t6, t5)}, diag, report


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def minus(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return a[0] - b[0], a[1] - b[1]


def medians(runs: list[dict[str, tuple[float, float]]], which: int) -> dict[str, float]:
    """Median of each phase: wall-clock (`which` 0) or CPU (1) seconds."""
    return {p: statistics.median(r[p][which] for r in runs) for p in PHASES}


def figures(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """The 2,000-rank benchmark: wall-clock and CPU medians of each phase, memory, report size."""
    folder = build(tmp / "capture", args.ranks, args.nodes)
    size_mb = sum(f.stat().st_size for f in folder.iterdir()) / 1e6
    runs: list[dict[str, tuple[float, float]]] = []
    for i in range(args.repeat):
        times, diag, report = measure_once(folder, tmp / f"out{i}")
        runs.append(times)
        print(f"run {i + 1}: " + " ".join(f"{p} {times[p][0]:.2f}s" for p in PHASES), file=sys.stderr)
    tracemalloc.start()
    render_markdown(reanalyse(folder))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    wall, cpu = medians(runs, 0), medians(runs, 1)
    return {
        "processes": len({(pr.node_id, pr.pid) for pr in diag.collection.processes}), "nodes": args.nodes,
        "stacks": len(diag.collection.processes), "capture_mb": round(size_mb, 1), "verdict": diag.verdict,
        "root_cause": diag.causes[0].pattern if diag.causes else None,
        "load_median_s": round(wall["load"], 3), "analysis_median_s": round(wall["analysis"], 3),
        "load_plus_analysis_median_s": round(statistics.median(r["load"][0] + r["analysis"][0] for r in runs), 3),
        "report_median_s": round(wall["render"], 3), "graph_svg_median_s": round(wall["svg"], 3),
        "report_html_median_s": round(wall["html"], 3), "write_outputs_median_s": round(wall["write"], 3),
        "graph_svg_bytes": (tmp / "out0" / "graph.svg").stat().st_size,
        "report_html_bytes": (tmp / "out0" / "report.html").stat().st_size,
        "write_outputs_runs_s": [round(r["write"][0], 3) for r in runs],
        "cpu_median_s": {p: round(v, 3) for p, v in cpu.items()},
        "peak_mb": round(peak / 1e6, 1), "report_lines": len(report.splitlines()), "report_chars": len(report),
        "loadavg": [round(x, 1) for x in os.getloadavg()],
    }


def series(points: list[tuple[int, int, int]], repeat: int, tmp: Path) -> list[dict[str, Any]]:
    """CPU-second medians of each phase at each (ranks, nodes, finished task rows) point."""
    tmp = Path(tempfile.mkdtemp(dir=tmp))
    rows = []
    for n, (ranks, nodes, finished) in enumerate(points):
        folder = build(tmp / f"cap{n}", ranks, nodes, odd=(2, ranks - 3), finished=finished)
        runs = [measure_once(folder, tmp / f"out{n}_{i}", cyclic_gc=False)[0] for i in range(repeat)]
        row = {"ranks": ranks, "nodes": nodes, "finished_tasks": finished, **{p: round(v, 3) for p, v in medians(runs, 1).items()}}
        print(json.dumps(row), file=sys.stderr)
        rows.append(row)
    return rows


def growth(rows: list[dict[str, Any]], size: str, floor: float, limit: float) -> tuple[list[str], list[str]]:
    """Lines of the table (CPU seconds and growth per doubling of `size` over the previous row)
    and the phases that grew more than `limit` from at least `floor` seconds."""
    lines, failed = [], []
    for i, row in enumerate(rows):
        cells = []
        for p in PHASES:
            cell = f"{row[p]:.3f}"
            if i:
                prev = rows[i - 1]
                doublings = math.log2(row[size] / prev[size])
                ratio = (row[p] / prev[p]) ** (1 / doublings) if prev[p] > 0 else float("inf")
                cell += f" ({ratio:.2f}x)"
                if prev[p] >= floor and ratio > limit:
                    failed.append(f"{p}: {prev[p]:.3f} -> {row[p]:.3f} CPU s ({ratio:.2f}x per doubling) "
                                  f"at {row['ranks']} ranks, {row['finished_tasks']} finished tasks")
            cells.append(cell)
        lines.append(f"| {row['ranks']} | {row['finished_tasks']} | " + " | ".join(cells) + " |")
    return lines, failed


def linearity(args: argparse.Namespace, tmp: Path) -> int:
    sizes = [int(x) for x in args.sizes.split(",") if x]
    tasks = [int(x) for x in args.tasks.split(",") if x]
    head = "| ranks | finished tasks | " + " | ".join(f"{p} CPU s (x per 2x)" for p in PHASES) + " |"
    rule = "|---:|---:|" + "---:|" * len(PHASES)
    failed: list[str] = []
    for label, size, points in (
            ("processes", "ranks", [(r, max(1, r // RANKS_PER_NODE), 0) for r in sizes]),
            ("task rows", "finished_tasks", [(args.tasks_ranks, max(1, args.tasks_ranks // RANKS_PER_NODE), t) for t in tasks])):
        if not points:
            continue
        rows = series(points, args.repeat, tmp)
        lines, bad = growth(rows, size, args.floor, args.max_growth)
        failed += bad
        print(f"\n{label} (medians of {args.repeat}, load average {os.getloadavg()[0]:.1f})\n{head}\n{rule}")
        print("\n".join(lines))
    for line in failed:
        print(f"super-linear: {line}", file=sys.stderr)
    return 1 if failed else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=2000)
    p.add_argument("--nodes", type=int, default=250)
    p.add_argument("--repeat", type=int, default=5, help="timed runs (default 5; medians reported)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--linearity", action="store_true", help="time each phase at growing sizes; exit 1 if not linear")
    p.add_argument("--sizes", default="250,500,1000,2000,4000", help="--linearity: ranks of each capture")
    p.add_argument("--tasks", default="20000,40000,80000", help="--linearity: FINISHED task rows added at --tasks-ranks")
    p.add_argument("--tasks-ranks", type=int, default=250, help="--linearity: ranks of the task-row captures")
    p.add_argument("--max-growth", type=float, default=2.6, help="--linearity: most growth per doubling (default 2.6)")
    p.add_argument("--floor", type=float, default=0.05, help="--linearity: CPU seconds under which a phase is not judged")
    args = p.parse_args()
    if args.repeat < 1 or args.ranks < 1 or args.nodes < 1 or args.tasks_ranks < 8:
        p.error("--repeat, --ranks and --nodes must be at least 1, --tasks-ranks at least 8")
    if any(int(x) < 8 for x in args.sizes.split(",") if x) or any(int(x) < 1 for x in args.tasks.split(",") if x):
        p.error("--sizes must be at least 8 ranks each, --tasks at least 1 row each")
    with tempfile.TemporaryDirectory() as tmp:
        if args.linearity:
            return linearity(args, Path(tmp))
        result = figures(args, Path(tmp))
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            print(f"{key:<28} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
