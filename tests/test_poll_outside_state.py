"""A poll on state outside its own process (a file's existence) while another process of the job
works: that work may satisfy it, so no hang is claimed. On a real capture of a healthy job
(tests/data/captures/poll_on_file_while_writer_works_healthy), with the variant where the other
process is not seen to advance."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "captures" / "poll_on_file_while_writer_works_healthy"


def test_a_file_poll_while_another_process_works_is_not_hang() -> None:
    # GIVEN rank 0 polling os.path.exists every 30 s while export_checkpoint computes and advances
    doc = to_json(reanalyse(CASE))
    # THEN the verdict stays open and says what works and what the poll reads
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "os.path.exists" in doc["summary"] and "export_checkpoint" in doc["summary"], doc["summary"]


def _exporter_gone(doc: dict[str, Any]) -> None:
    """No dump of the exporter (nothing else of the job seen working)."""
    doc["processes"] = [p for p in doc["processes"]
                        if "export_checkpoint" not in str(p.get("task_name") or p.get("title") or "")]


def test_a_file_poll_with_nothing_else_seen_working_is_the_hang_it_was(tmp_path: Path) -> None:
    # GIVEN the same capture with no other process of the job seen at work
    folder = capture_variant(tmp_path, CASE, stacks=_exporter_gone)
    doc = to_json(reanalyse(folder))
    # THEN nothing else works that could change what the poll reads: it is the poll's hang
    assert doc["verdict"] == "hang", doc["summary"]
    assert doc["root_causes"][0]["pattern"] == "poll-never-satisfied"
