"""A collective that nothing in the job can complete: every rank of the job waits in it and a member
of the group is not a process of the job. On the real recorded capture weights_to_outside_publisher
(two Trainers, WORLD_SIZE=3, the third member a detached WeightPublisher of another job, connected
to both by gloo's TCP), each variant with one fact taken away or added where the answer must change.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "cases" / "weights_to_outside_publisher"


def variant(tmp_path: Path, stacks: Any = None, tasks: Any = None) -> Path:
    """A copy of the capture with its stacks.json (`stacks(doc)`) and both task readings
    (`tasks(rows)`) edited."""
    out = tmp_path / CASE.name
    shutil.copytree(CASE, out)
    if stacks is not None:
        doc = json.loads((out / "stacks.json").read_text())
        stacks(doc)
        (out / "stacks.json").write_text(json.dumps(doc))
    if tasks is not None:
        snap = json.loads((out / "snapshot.json").read_text())
        tasks(snap["tasks"])
        (out / "snapshot.json").write_text(json.dumps(snap))
        rows = json.loads((out / "tasks_after.json").read_text())
        tasks(rows)
        (out / "tasks_after.json").write_text(json.dumps(rows))
    return out


def drop(field: str) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            info.pop(field, None)
    return edit


def outside_pid() -> int:
    """The pid of the member outside the job: a socket peer of the trainers that is no process dumped."""
    doc = json.loads((CASE / "stacks.json").read_text())
    dumped = {p["pid"] for p in doc["processes"]}
    peers = {p["pid"] for info in doc["meta"]["info"] for p in info.get("socket_peers") or []}
    (pid,) = peers - dumped
    return int(pid)


def culprits(doc: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(c["kind"], c.get("class_name")) for c in doc["root_causes"][0]["culprits"]]


def test_the_member_outside_the_job_is_the_culprit_not_the_ranks() -> None:
    # GIVEN the real capture WHEN re-analysed
    doc = to_json(reanalyse(CASE))
    # THEN the publisher of the other job is the culprit, the trainers wait for it
    assert doc["verdict"] == "hang" and doc["root_causes"][0]["pattern"] == "collective-incomplete"
    assert culprits(doc) == [("actor", "WeightPublisher")]
    assert doc["root_causes"][0]["culprits"][0]["pid"] == outside_pid()
    chain = [(step["name"], step["pattern"]) for step in doc["chains"][0]]
    assert chain[1] == ("Trainer", "collective-wait") and chain[-1][0] == "WeightPublisher"
    assert any("connected by TCP" in e for e in doc["root_causes"][0]["evidence"])


def test_without_the_socket_fact_the_world_size_still_shows_a_member_missing(tmp_path: Path) -> None:
    # GIVEN the capture without the TCP peers (an older probe, or /proc unreadable)
    doc = to_json(reanalyse(variant(tmp_path, stacks=drop("socket_peers"))))
    # THEN the collective itself is the culprit (WORLD_SIZE 3, two ranks in the job), never a trainer
    assert doc["verdict"] == "hang" and doc["root_causes"][0]["pattern"] == "collective-incomplete"
    assert culprits(doc) == [("collective", None)]
    assert "WORLD_SIZE is 3" in json.dumps(doc["root_causes"][0]["evidence"])


def test_with_nothing_showing_a_member_missing_it_is_not_called_a_hang(tmp_path: Path) -> None:
    # GIVEN neither the TCP peers nor the WORLD_SIZE: ranks in one collective, nothing else known
    def edit(doc: dict[str, Any]) -> None:
        drop("socket_peers")(doc)
        drop("env")(doc)
    diag = reanalyse(variant(tmp_path, stacks=edit))
    # THEN inconclusive: a member outside, a rank never started, different groups cannot be told apart
    assert diag.verdict == "inconclusive"
    assert all(c.pattern != "collective-incomplete" for c in diag.causes)


def test_a_peer_the_ranks_called_through_ray_is_not_a_member(tmp_path: Path) -> None:
    # GIVEN the capture where the publisher's process also ran a call a trainer made during setup
    # (finished: Ray keeps the caller's gRPC connection open, which explains the TCP link)
    pid = outside_pid()

    def edit(rows: list[dict[str, Any]]) -> None:
        setup = next(t for t in rows if t["name"] == "Trainer.setup")
        rows.append({**setup, "task_id": "aa" * 20 + setup["job_id"], "name": "WeightPublisher.join",
                     "func_or_class_name": "WeightPublisher.join", "worker_pid": pid,
                     "parent_task_id": setup["task_id"], "actor_id": None})
    doc = to_json(reanalyse(variant(tmp_path, tasks=edit)))
    # THEN it is not named: what is left is the WORLD_SIZE's missing member
    assert all(c.get("pid") != pid for cause in doc["root_causes"] for c in cause["culprits"])
    assert culprits(doc) == [("collective", None)]
