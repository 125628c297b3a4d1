"""diagnosis.json: the machine-readable diagnosis (contract in references/diagnosis.schema.json)."""

from __future__ import annotations

from typing import Any

from debug_hang.analyse import next_steps
from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.analyse.failures import tool_problem
from debug_hang.analyse.fixes import cause_fix
from debug_hang.analyse.progress import progress_confidence

DIAGNOSIS_SCHEMA = "debug-hang/diagnosis/v1"
# Additive revisions of v1 (new optional fields only): 2 adds root_causes[].next, job_code,
# next_step and references_root; 3 actor_name; 4 tool_problem (the summary then starts with its
# headline) and root_causes[].proof; 5 collection.sampling and progress.busy.
SCHEMA_REVISION = 5


def to_json(diag: Diagnosis) -> dict[str, Any]:
    """diagnosis.json, contract v1 (references/diagnosis.schema.json)."""
    guide = next_steps.guide(diag)
    root = []
    for i, cause in enumerate(diag.causes):
        first = cause.culprits[0]
        fix = cause_fix(cause)
        root.append({
            "pattern": cause.pattern,
            "summary": cause.summary,
            "culprit": {
                "kind": first.kind,
                "class_name": first.class_name, "actor_name": first.actor_name, "task_name": first.task_name,
                "actor_id": first.actor_id, "task_id": first.task_id, "pid": first.pid,
                "node_id": first.node_id, "rank": first.rank,
            },
            "culprits": [{"kind": c.kind, "class_name": c.class_name, "actor_name": c.actor_name, "pid": c.pid,
                          "actor_id": c.actor_id, "node_id": c.node_id, "rank": c.rank,
                          "name": c.name} for c in cause.culprits],
            "confidence": round(cause.confidence, 2),
            "evidence": cause.evidence,
            "fix": fix,
            "next": guide.to_json()["causes"][i] if i < len(guide.causes) else None,
            "proof": diag.proofs[i].to_json() if i < len(diag.proofs) else None,
        })
    chain_json = [
        [{"kind": n.kind, "name": n.name, "pid": n.pid, "node_id": n.node_id,
          "pattern": n.pattern, "state": n.state, "waits_on": why} for n, why in chain]
        for chain in diag.chains
    ]
    errors = [e.to_dict() for e in diag.collection.errors + diag.errors]
    problem = tool_problem(diag)
    doc: dict[str, Any] = {
        "schema": DIAGNOSIS_SCHEMA,
        "schema_revision": SCHEMA_REVISION,
        "address": diag.address,
        "job_id": diag.job_id,
        "verdict": diag.verdict,
        "summary": diag.summary if problem is None else f"{problem.headline} {diag.summary}",
        "root_causes": root,
        "chains": chain_json,
        "collection": {
            "nodes": diag.collection.nodes,
            "processes": len({p.ref for p in diag.collection.processes}),
            "stacks": len(diag.collection.processes),
            "seconds": round(diag.seconds, 2),
            "timings": diag.timings,
            "errors": errors,
        },
        "job_code": guide.to_json()["job_code"],
        "next_step": {"command": guide.next_command, "why": guide.next_why} if guide.next_command else None,
        "references_root": guide.references_root,
    }
    if problem is not None:
        doc["tool_problem"] = problem.to_json()
    if diag.truncated:
        doc["collection"]["truncated"] = diag.truncated
    if diag.sampling:
        doc["collection"]["sampling"] = diag.sampling
    if diag.signals or diag.busy:
        doc["progress"] = {"processes": [s.to_dict() for s in diag.signals],
                           "confidence": progress_confidence(diag.signals) if diag.verdict == "no-hang" else None}
        if diag.busy:
            doc["progress"]["busy"] = [w.to_dict() for w in diag.busy]
    if diag.flight_recorder is not None or diag.fr_notes:
        fr = diag.flight_recorder.to_json() if diag.flight_recorder is not None else {
            "ranks_dumped": [], "culprit_ranks": [], "groups": [], "errors": [], "torch_check": None}
        doc["flight_recorder"] = {**fr, "notes": list(diag.fr_notes)}
    return doc
