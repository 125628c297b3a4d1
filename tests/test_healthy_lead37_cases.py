"""Healthy jobs that look stuck, on real captures recorded live in stop 37
(tests/data/captures/README.md): a hot spin on a flag a computing thread will set, a served
Manager lock held by a computing client, and a native child compressing. None may be called hung."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"


def _doc(name: str) -> dict:
    return to_json(reanalyse(Path(CAPTURES / name)))


def test_a_spin_on_a_flag_that_a_computing_thread_sets_is_never_hang() -> None:
    # GIVEN `while not self.done: pass` at 100 % CPU while the actor's fit thread runs numpy products
    doc = _doc("spin_on_flag_worker_thread_computes_healthy")
    # THEN the verdict stays open and says that another thread of the process works
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "other threads of it work" in doc["summary"], doc["summary"]


def test_a_served_lock_held_by_a_live_computing_client_is_not_a_dead_holder() -> None:
    # GIVEN worker 1 in a Manager lock's acquire, worker 0 holding it while it computes (its handler idle at recv)
    doc = _doc("manager_lock_live_holder_computes_healthy")
    # THEN no hang, and the lock is never said to be held by a client that is gone
    assert doc["verdict"] != "hang", doc["summary"]
    patterns = {cause["pattern"] for cause in doc["root_causes"]}
    assert "native-wait-holder-died" not in patterns, patterns


def test_a_parent_waiting_on_a_native_child_that_writes_is_no_hang() -> None:
    # GIVEN an actor in subprocess.run on `xz -9`, which has no Python stack and prints nothing
    doc = _doc("native_child_compresses_healthy")
    # THEN its disk writes show the child works
    assert doc["verdict"] == "no-hang", doc["summary"]
    assert "wrote" in doc["summary"], doc["summary"]
