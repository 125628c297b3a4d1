"""Threads the standard library runs for its own machinery wait by design: multiprocessing's queue
feeder thread, idle at `nwait()` until its own process puts, is no event nothing sets. On a real
capture of a healthy job (tests/data/captures/async_process_pool_child_computes_healthy)."""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "captures" / "async_process_pool_child_computes_healthy"


def test_an_async_actor_awaiting_a_busy_process_pool_child_is_not_hung() -> None:
    # GIVEN an async actor whose only waiting threads are the executor's manager and the queue feeder
    diag = reanalyse(CASE)
    doc = to_json(diag)
    # THEN no hang, and the feeder thread's wait is read as the library's idle point
    assert doc["verdict"] != "hang", doc["summary"]
    assert all(rc["pattern"] != "event-never-set" for rc in doc["root_causes"]), doc["root_causes"]
    feeders = [m for v in diag.verdicts for t, m in v.threads if t.name == "QueueFeederThread"]
    assert feeders and all(m.pattern == "ray-housekeeping" for m in feeders), [m.pattern for m in feeders]
