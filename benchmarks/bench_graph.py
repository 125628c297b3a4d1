#!/usr/bin/env python3
"""Time build_graph on N copies of a real blocked actor (ray.get on a call it made).

The process is the Trainer of the recorded producer_never_produces case (tests/data/cases/);
each copy gets its own actor, a RUNNING call and one pending child task, so the graph has N
blocked actors, 2N tasks and N edges. Checks that following calls stays linear in the tasks.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from debug_hang.analyse.graph import GraphInputs, build_graph  # noqa: E402
from debug_hang.analyse.patterns import match_process  # noqa: E402
from debug_hang.pipeline import reanalyse  # noqa: E402
from debug_hang.rows import ActorRow, JobRow, tasks_of  # noqa: E402

JOB = "01000000"


def inputs(n: int) -> GraphInputs:
    diag = reanalyse(ROOT / "tests" / "data" / "cases" / "producer_never_produces")
    trainer = next(v.process for v in diag.verdicts if v.process.actor_class == "Trainer")
    verdicts, actors, tasks = [], [], []
    for i in range(n):
        aid, tid = f"a{i:06d}", f"t{i:06d}"
        proc = dataclasses.replace(trainer, pid=100000 + i, actor_id=aid)
        verdicts.append(match_process(proc))
        actors.append({"actor_id": aid, "class_name": "Trainer", "state": "ALIVE", "job_id": JOB,
                       "pid": proc.pid, "node_id": proc.node_id})
        tasks.append({"task_id": tid, "actor_id": aid, "name": "Trainer.train", "state": "RUNNING",
                      "type": "ACTOR_TASK", "worker_pid": proc.pid, "node_id": proc.node_id, "job_id": JOB,
                      "parent_task_id": "f" * 40 + JOB})
        tasks.append({"task_id": tid + "c", "name": "fetch", "state": "PENDING_NODE_ASSIGNMENT", "type": "NORMAL_TASK",
                      "job_id": JOB, "parent_task_id": tid, "required_resources": {"CPU": 1}})
    return GraphInputs(job=JobRow.of({"job_id": JOB}), actors=[ActorRow.of(a) for a in actors], tasks=tasks_of(tasks),
                       placement_groups=[],
                       node_totals=[{"CPU": 4.0}], verdicts=verdicts, available={"CPU": 0.0})


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sizes", nargs="*", type=int, default=[500, 1000, 2000, 4000], help="numbers of blocked actors")
    args = p.parse_args()
    for n in args.sizes:
        inp = inputs(n)
        start = time.perf_counter()
        graph = build_graph(inp)
        print(f"{n:>6} blocked actors: build_graph {time.perf_counter() - start:.2f} s "
              f"({len(graph.nodes)} nodes, {len(graph.edges)} edges)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
