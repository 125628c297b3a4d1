#!/usr/bin/env python3
"""What the setter rule adds to a diagnosis: on the node, the probe's reading of who sets what a
frame waits on and the Ray calls each job frame makes later (probe/setters.py); in the analysis,
the graph pass follow_event_setters (graph/setters.py).

Probe: N processes whose threads stand in the recorded Gate's wait (redteam/eval_results_gather.py:28)
under 3 job frames of a 777-line file, read by add_source_lines with and without the setter
reading. Graph: N copies of the recorded Gate actor (event-never-set, its setter known, nobody
calling it: the pass's costliest branch) built with and without the pass.
"""

from __future__ import annotations

import argparse
import dataclasses
import linecache
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import debug_hang.analyse.graph as graph  # noqa: E402
from debug_hang.analyse.graph import GraphInputs, build_graph  # noqa: E402
from debug_hang.analyse.patterns import match_process  # noqa: E402
from debug_hang.model import Frame, Process, Thread  # noqa: E402
from debug_hang.pipeline import reanalyse  # noqa: E402
from debug_hang.probe import setters, source_lines  # noqa: E402
from debug_hang.rows import ActorRow, JobRow, tasks_of  # noqa: E402

JOB = "02000000"
JOB_FILE = str(ROOT / "redteam" / "eval_results_gather.py")
BIG_FILE = str(ROOT / "debug_hang" / "analyse" / "busy.py")


def processes(n: int) -> list[Process]:
    frames = [Frame("Gate.wait", JOB_FILE, 28)] + [Frame(f"f{i}", BIG_FILE, 100 + 150 * i) for i in range(3)]
    return [Process(pid=i, threads=[Thread(name="MainThread", frames=[dataclasses.replace(f) for f in frames])])
            for i in range(n)]


def time_probe(n: int, with_setters: bool) -> float:
    saved = source_lines._add_setters
    if not with_setters:
        source_lines._add_setters = lambda frames, clean: None  # type: ignore[assignment]
    linecache.clearcache()
    setters._PARSED.clear()
    procs = processes(n)
    start = time.perf_counter()
    for proc in procs:
        source_lines.add_source_lines(proc)
    source_lines._add_setters = saved  # type: ignore[assignment]
    return time.perf_counter() - start


def gates(n: int) -> GraphInputs:
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "event_setter_called_after_wait")
    gate = next(v.process for v in diag.verdicts if v.process.actor_class == "Gate")
    verdicts, actors, tasks = [], [], []
    for i in range(n):
        aid, tid = f"a{i:06d}", f"t{i:06d}"
        proc = dataclasses.replace(gate, pid=100000 + i, actor_id=aid)
        verdicts.append(match_process(proc))
        actors.append({"actor_id": aid, "class_name": "Gate", "state": "ALIVE", "job_id": JOB,
                       "pid": proc.pid, "node_id": proc.node_id})
        tasks.append({"task_id": tid, "actor_id": aid, "name": "Gate.wait", "state": "RUNNING", "type": "ACTOR_TASK",
                      "worker_pid": proc.pid, "node_id": proc.node_id, "job_id": JOB, "parent_task_id": "f" * 40 + JOB})
    return GraphInputs(job=JobRow.of({"job_id": JOB}), actors=[ActorRow.of(a) for a in actors], tasks=tasks_of(tasks),
                       placement_groups=[], node_totals=[{"CPU": 4.0}], verdicts=verdicts, available={"CPU": 0.0})


def time_graph(inp: GraphInputs, with_pass: bool) -> float:
    saved = graph.PASSES
    if not with_pass:
        graph.PASSES = tuple(p for p in saved if p.name != "follow_event_setters")
    start = time.perf_counter()
    build_graph(inp)
    graph.PASSES = saved
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sizes", nargs="*", type=int, default=[100, 1000, 4000], help="numbers of processes")
    args = p.parse_args()
    for n in args.sizes:
        without, with_ = time_probe(n, False), time_probe(n, True)
        print(f"{n:>6} processes: add_source_lines {without:.3f} s without, {with_:.3f} s with the setter reading "
              f"(+{(with_ - without) * 1000 / n:.2f} ms per process, first parse included)")
        inp = gates(n)
        without, with_ = time_graph(inp, False), time_graph(inp, True)
        print(f"{n:>6} Gate actors: build_graph {without:.2f} s without, {with_:.2f} s with follow_event_setters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
