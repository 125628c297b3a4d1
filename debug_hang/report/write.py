"""Write a diagnosis to its output folder: phase outputs, stacks.json, report.md, diagnosis.json."""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Any

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.model import stacks_to_dict
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown, render_stacks_text


def write_outputs(diag: Diagnosis, out: Path, tasks_after: list[dict[str, Any]] | None = None) -> None:
    """The phase outputs (as the seed's script left them), stacks.json, report.md, diagnosis.json."""
    out.mkdir(parents=True, exist_ok=True)
    snap = diag.snapshot
    if snap is not None:
        (out / "01_cluster.txt").write_text((snap.cluster_status_text or "(cluster status unavailable)") + "\n")
        (out / "02_jobs.json").write_text(json.dumps(snap.jobs, indent=1, default=str))
        job_tasks = [t for t in snap.tasks if t.get("job_id") == diag.job_id]
        (out / "03_tasks.json").write_text(json.dumps(job_tasks, indent=1, default=str))
        job_actors = [a for a in snap.actors if a.get("job_id") == diag.job_id]
        (out / "04_actors.json").write_text(json.dumps(job_actors, indent=1, default=str))
        (out / "snapshot.json").write_text(json.dumps(snap.to_dict(), default=str))
    (out / "05_stacks.txt").write_text(render_stacks_text(diag.collection.processes))
    meta = {"job_id": diag.job_id, "info": diag.collection.info_to_json(),
            "errors": [e.to_dict() for e in diag.collection.errors], "nodes": diag.collection.nodes,
            "targets": diag.collection.targets, "seconds": diag.collection.seconds,
            "paths": diag.collection.paths, "job_choice": diag.job_choice, "address": diag.address,
            "diagnosis_seconds": diag.seconds}
    (out / "stacks.json").write_text(json.dumps(stacks_to_dict(diag.collection.processes, meta)))
    if tasks_after is not None:
        (out / "tasks_after.json").write_text(json.dumps(tasks_after, default=str))
    if diag.evidence is not None:
        logs = out / "logs"
        logs.mkdir(exist_ok=True)
        for key, node_ev in diag.evidence.per_node.items():
            node = diag.graph.nodes[key]
            for suffix, text in node_ev.logs.items():
                (logs / f"{node.class_name or node.kind}-{node.pid}.{suffix}").write_text(text)
        if diag.evidence.driver_log:
            (logs / "driver.log").write_text(diag.evidence.driver_log)
        (out / "evidence.json").write_text(json.dumps({
            "per_node": {k: {"highlights": v.highlights, "history": v.history, "errors": v.errors}
                         for k, v in diag.evidence.per_node.items()},
            "driver_highlights": diag.evidence.driver_highlights, "errors": diag.evidence.errors}, indent=1))
    if diag.collection.flight_recorder:
        write_flight_recorder(diag.collection.flight_recorder, out / "flight_recorder")
    (out / "report.md").write_text(render_markdown(diag))
    (out / "diagnosis.json").write_text(json.dumps(to_json(diag), indent=2, default=str))


def write_flight_recorder(nodes: list[dict[str, Any]], folder: Path) -> None:
    """The Flight Recorder dumps as files (`rank_<N>`, `rank_<N>.json`: `debug-hang fr` reads the
    folder) plus `index.json` (where each came from, what was skipped). Bytes are written as read."""
    folder.mkdir(parents=True, exist_ok=True)
    index: list[dict[str, Any]] = []
    for node in nodes:
        kept: list[dict[str, Any]] = []
        skipped = list(node.get("skipped") or [])
        for item in node.get("dumps") or []:
            rank = item.get("rank")
            name = f"rank_{rank}" + (".json" if item.get("format") == "json" else "")
            if not isinstance(rank, int) or (folder / name).exists():
                skipped.append({"path": item.get("path"), "reason": "a dump of the same rank was already kept"})
                continue
            try:
                (folder / name).write_bytes(base64.b64decode(str(item.get("data_b64", "")), validate=True))
            except (binascii.Error, ValueError):
                skipped.append({"path": item.get("path"), "reason": "damaged in transfer"})
                continue
            kept.append({k: v for k, v in item.items() if k != "data_b64"} | {"file": name})
        index.append({"node_id": node.get("node_id"), "prefixes": node.get("prefixes") or [],
                      "pipes": node.get("pipes") or [], "skipped": skipped, "dumps": kept})
    (folder / "index.json").write_text(json.dumps(index, indent=1))
