"""Healthy jobs that look stopped in a one-second window, on real captures recorded live
(tests/data/captures/README.md): a parent waiting on busy children whose loop state advances, and a
lock owner sleeping between the rounds of a bounded loop. Neither may be called hung."""

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


def test_a_parent_waiting_on_busy_advancing_dataloader_workers_is_no_hang() -> None:
    # GIVEN a trainer in the DataLoader's queue poll, its two workers computing a slow augmentation
    doc = _doc("dataloader_workers_slow_augment_healthy")
    # THEN the job computes: no hang, and the summary says what advanced
    assert doc["verdict"] == "no-hang", doc["summary"]
    assert "advanced" in doc["summary"], doc["summary"]


def test_a_lock_owner_sleeping_in_a_bounded_loop_is_never_hang() -> None:
    # GIVEN a lock held through a paced for-loop (sleep between chunks) and a caller waiting at the lock
    doc = _doc("lock_held_through_paced_upload_healthy")
    # THEN the verdict stays open, naming the paced loop, and no cause is given as a hang
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "paced work" in doc["summary"], doc["summary"]
