"""A parent that joins a multiprocessing child before reading the Queue the child filled, on a
real capture (tests/data/captures/mp_queue_child_joined_before_get,
redteam/mp_child_joined_before_queue_read.py): the child's exit waits for its queue feeder, asleep
writing the full queue pipe that only the parent reads. The probe reads that pipe (`other_pipes`)
and the cycle is a pipe-full deadlock with the parent's join first, not a child that hangs alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "mp_queue_child_joined_before_get"


def test_the_parent_joining_before_get_is_the_culprit_of_a_pipe_deadlock() -> None:
    # GIVEN ShardStats in proc.join(), its child's QueueFeederThread asleep in pipe_write
    doc = to_json(reanalyse(CAPTURE))
    # THEN it is a pipe-full deadlock, the parent (the join line) first
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "pipe-full-deadlock", cause
    assert cause["culprits"][0]["class_name"] == "ShardStats" and cause["culprits"][0]["kind"] == "actor", cause["culprits"]
    assert any("blocked writing its pipe (fd" in e for e in cause["evidence"]), cause["evidence"]


def test_without_the_pipe_reading_the_parent_is_not_blamed_for_a_pipe(tmp_path: Path) -> None:
    # GIVEN the same capture without the probe's reading of the child's blocked pipe write
    def unread(stacks: dict[str, Any]) -> None:
        for info in stacks["meta"]["info"]:
            info.pop("other_pipes", None)

    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=unread)))
    # THEN no pipe deadlock is claimed
    assert "pipe-full-deadlock" not in {c["pattern"] for c in doc["root_causes"]}, doc["summary"]
