"""A child that has exited (a zombie, not reaped yet) is no child that never exits, on a real
capture (tests/data/captures/subprocess_grandchild_holds_stdout,
redteam/subprocess_grandchild_holds_stdout.py, round 14b): Indexer runs
`subprocess.run(..., capture_output=True)` of a launcher that starts a daemon grandchild (it
inherits stdout/stderr) and exits at once. The launcher is state Z in every reading; communicate()
waits for end-of-file that the grandchild's open pipes hold back. Main named the zombie the
culprit of a hang ("a child process that never exits") - a healthy launcher whose grandchild
finishes later would have been a false hang."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "subprocess_grandchild_holds_stdout"


def test_a_zombie_child_is_not_the_culprit_and_the_parent_says_why_it_waits() -> None:
    # GIVEN Indexer in subprocess.run (communicate) and its launcher child in state Z at both readings
    diag = reanalyse(CAPTURE)
    doc = to_json(diag)
    top = doc["root_causes"][0]
    # THEN no hang naming the exited child; the parent is the candidate, its evidence names the pipes
    assert doc["verdict"] != "hang"
    assert all(c.get("kind") != "process" for c in top["culprits"]), top["culprits"]
    indexer = next(n for n in diag.graph.nodes.values() if n.class_name == "Indexer" and n.kind == "actor")
    assert any("zombie" in e and "end-of-file" in e for e in indexer.evidence), indexer.evidence


def test_a_live_child_in_the_same_place_is_still_the_chain_end(tmp_path: Path) -> None:
    # GIVEN the same readings, but the child sleeping (S) instead of exited
    def alive(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            if info.get("run_state") == ["Z", "Z"]:
                info["run_state"] = ["S", "S"]
    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=alive)))
    # THEN the old reading: a child that does not exit
    assert doc["root_causes"][0]["pattern"] == "child-process-hang"
