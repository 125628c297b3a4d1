"""A parent that holds a file lock while it waits for a child that takes the same lock, on a real
capture (tests/data/captures/flock_held_across_child_that_takes_it, redteam/repo_lock_across_child.py):
the kernel lists the child waiting for a lock its own waiting parent holds, a cycle whose cause is the
parent holding the lock across the wait, not "a child that never exits"."""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "flock_held_across_child_that_takes_it"


def test_a_child_waiting_for_its_parents_file_lock_closes_a_cycle_with_the_parent_first() -> None:
    # GIVEN Publisher in subprocess.run while holding flock(.lock), its child in flock() on the same file
    doc = to_json(reanalyse(CAPTURE))
    # THEN it is a hang through the file lock, the parent (the holder) named first
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "file-lock-deadlock", cause["pattern"]
    first = cause["culprits"][0]
    assert first["class_name"] == "Publisher" and first["kind"] == "actor", first
    # AND the child's edge goes to the lock's holder, its parent
    evidence = "\n".join(cause["evidence"])
    assert "FLOCK WRITE lock" in evidence and "held by pid 31181" in evidence, evidence


def test_a_cycles_mechanism_quotes_its_members_waits_not_a_victims() -> None:
    # GIVEN the same capture, the driver waiting in ray.get on Publisher outside the cycle
    mechanism = to_json(reanalyse(CAPTURE))["root_causes"][0]["proof"]["mechanism"]
    # THEN the mechanism sentence says what closes the cycle (the flock), not the driver's ray.get
    assert "FLOCK WRITE lock" in mechanism and "waits for child pid" in mechanism, mechanism
    assert "creates object" not in mechanism, mechanism
