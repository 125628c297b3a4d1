"""A large capture built from a recorded real one: its ranks copied with new pids, ranks, actor,
task and node ids, so the analysis and the report can be run at a scale no loopback cluster
reaches (2,000 ranks on 250 nodes). Every stack is a recorded stack; only the
identities are new. Used by tests/test_report_scale.py and benchmarks/bench_scale.py.

    python tests/scale_capture.py OUT [--ranks 2000] [--nodes 250] [--odd 2,1337] [--finished 0]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "tests" / "data" / "cases" / "gloo_skipped_allreduce"
ODD_TEMPLATE_RANK = 2  # the recorded rank that skipped the all-reduce
DEFAULT_ODD = (2, 1337)


def build(out: Path, ranks: int = 2000, nodes: int = 250, odd: tuple[int, ...] = DEFAULT_ODD,
          case: Path = CASE, finished: int = 0) -> Path:
    """Write a capture folder (snapshot.json, stacks.json, tasks_after.json) to `out`.

    Rank r copies the recorded rank ODD_TEMPLATE_RANK when r is in `odd`, else one of the
    recorded ranks blocked in the collective (in turn); ranks sit ranks/nodes to a node.
    `finished` more task rows are added to both task reads: copies of the recorded FINISHED actor-task
    rows of the ranks (in turn) with new task ids, spread over the ranks (calls the job made earlier).
    """
    snap = json.loads((case / "snapshot.json").read_text())
    stacks = json.loads((case / "stacks.json").read_text())
    after = json.loads((case / "tasks_after.json").read_text())
    procs = stacks["processes"]
    by_rank = {p["rank"]: p["actor_id"] for p in procs if p.get("rank") is not None}
    blocked = sorted(r for r in by_rank if r != ODD_TEMPLATE_RANK)
    actor_rows = {a["actor_id"]: a for a in snap["actors"]}
    node_row = snap["nodes"][0]
    old_node = node_row["node_id"]
    node_ids = [old_node] + [hashlib.sha224(f"node {i}".encode()).hexdigest() for i in range(1, nodes)]
    per_node = max(1, -(-ranks // nodes))
    old_info = stacks["meta"]["info"]
    info: list[dict[str, Any]] = []
    new_procs = [p for p in procs if p.get("rank") is None]  # the driver, as recorded
    info += [row for row in _info_rows(old_info) if row["pid"] in {p["pid"] for p in new_procs}]
    actors = []
    tasks = [t for t in snap["tasks"] if t.get("actor_id") not in actor_rows]
    tasks_after = [t for t in after if t.get("actor_id") not in actor_rows]
    for r in range(ranks):
        template = ODD_TEMPLATE_RANK if r in odd else blocked[r % len(blocked)]
        old_actor = by_rank[template]
        actor_id = f"{r + 1:024x}" + old_actor[-8:]
        node = node_ids[min(r // per_node, nodes - 1)]
        pid = 100_000 + r
        old_pid = actor_rows[old_actor]["pid"]
        old_tasks = sorted({t["task_id"] for t in [*snap["tasks"], *after] if t.get("actor_id") == old_actor}
                           | {p["task_id"] for p in procs if p.get("actor_id") == old_actor and p.get("task_id")})
        task_ids = {old: f"{r + 1:012x}{i:04x}" + actor_id for i, old in enumerate(old_tasks)}
        for p in procs:
            if p.get("actor_id") == old_actor:
                new = copy.deepcopy(p)
                new.update(pid=pid, actor_id=actor_id, node_id=node, rank=r, task_id=task_ids.get(p.get("task_id")))
                new_procs.append(new)
        for row in _info_rows(old_info):
            if row["pid"] == old_pid:
                env = {**row.get("env", {}), "RANK": str(r), "LOCAL_RANK": str(r % per_node), "WORLD_SIZE": str(ranks)}
                info.append({**row, "pid": pid, "node_id": node, "env": env})
        actors.append({**actor_rows[old_actor], "actor_id": actor_id, "pid": pid, "node_id": node})
        for source, sink in ((snap["tasks"], tasks), (after, tasks_after)):
            sink += [{**t, "task_id": task_ids[t["task_id"]], "actor_id": actor_id, "worker_pid": pid, "node_id": node}
                     for t in source if t.get("actor_id") == old_actor]
    extra = _finished_copies([t for t in tasks if t.get("type") == "ACTOR_TASK" and t.get("state") == "FINISHED"], finished)
    tasks += extra
    tasks_after += extra
    snap["actors"], snap["tasks"] = actors, tasks
    snap["nodes"] = [{**node_row, "node_id": n, "is_head_node": i == 0, "node_ip": f"127.0.{i // 250}.{i % 250 + 1}",
                      "labels": {"ray.io/node-id": n}} for i, n in enumerate(node_ids)]
    stacks["processes"] = new_procs
    stacks["meta"].update(info=info, nodes=nodes, targets=len({(p["node_id"], p["pid"]) for p in new_procs}),
                          paths={n: "local" for n in node_ids})
    out.mkdir(parents=True, exist_ok=True)
    (out / "snapshot.json").write_text(json.dumps(snap))
    (out / "stacks.json").write_text(json.dumps(stacks))
    (out / "tasks_after.json").write_text(json.dumps(tasks_after))
    return out


def _finished_copies(rows: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """`n` copies of the FINISHED rows (in turn, so spread over the ranks), each a new task id
    (its own first digit `f`: never one of the ids `build` gives the ranks' tasks)."""
    if not rows or n <= 0:
        return []
    return [{**rows[i % len(rows)], "task_id": f"f{i + 1:015x}" + rows[i % len(rows)]["task_id"][16:]} for i in range(n)]


def _info_rows(raw: Any) -> list[dict[str, Any]]:
    if isinstance(raw, dict):
        return [{"pid": int(k), **v} for k, v in raw.items()]
    return [dict(row) for row in raw or []]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, help="folder to write the capture to")
    ap.add_argument("--ranks", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=250)
    ap.add_argument("--odd", default=",".join(map(str, DEFAULT_ODD)), help="ranks that skip the collective")
    ap.add_argument("--finished", type=int, default=0, help="more FINISHED task rows (copies of the recorded ones)")
    args = ap.parse_args(argv)
    build(args.out, args.ranks, args.nodes, tuple(int(x) for x in args.odd.split(",") if x), finished=args.finished)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
