"""The rounds of a poll are no progress even when Ray has not yet filled in where the newest
round ran, on a real capture (tests/data/captures/poll_rounds_worker_not_yet_reported,
examples/actor_restart_lost_state.py under load: the CI rehearsal of stop 38 read it as no-hang)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "poll_rounds_worker_not_yet_reported"


def _ready_rounds(path: Path) -> list[dict[str, Any]]:
    doc = json.loads(path.read_text())
    rows = doc["tasks"] if isinstance(doc, dict) else doc
    return [t for t in rows if t.get("name") == "Coordinator.ready" and t.get("state") == "FINISHED"]


def test_rounds_whose_worker_is_not_reported_yet_are_still_rounds() -> None:
    # GIVEN the Trainer's poll of Coordinator.ready, 94 rounds on the idle Coordinator and the
    # newest 2 FINISHED with no worker pid in the task rows yet
    assert any(not t.get("worker_pid") for t in _ready_rounds(CAPTURE / "tasks_after.json"))
    # THEN those are rounds of the poll, not progress: the restarted Coordinator is the culprit
    diag = reanalyse(CAPTURE)
    assert diag.verdict == "hang", diag.summary
    assert diag.causes[0].pattern == "actor-restart-lost-state"


def test_a_call_with_no_worker_whose_earlier_rounds_ran_nowhere_quiet_stays_progress(tmp_path: Path) -> None:
    # GIVEN the same rows with every round's worker unknown: where they ran is not known at all
    def unknown(rows: list[dict[str, Any]]) -> None:
        for t in rows:
            if t.get("name") == "Coordinator.ready":
                t["worker_pid"] = None
    diag = reanalyse(capture_variant(tmp_path, CAPTURE, tasks=unknown))
    # THEN they are not taken for rounds: the finished calls read as progress, as before
    assert diag.verdict == "no-hang", diag.summary
