"""A lock held across a wait for the thread that must take it first: the line to print is the
holder's wait, on a real capture (tests/data/captures/queue_get_under_caller_lock,
redteam/queue_get_under_caller_lock.py, round 14b): BatchFeeder.next_batch holds
`self._state_lock` while `_take` waits in `self.q.get()`; the decode thread, the only producer,
waits at `with self._state_lock:` before its put. The ring has one lock: the fix is where it
is held across the get, not where the producer waits for it."""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "queue_get_under_caller_lock"
CASE = ROOT / "tests" / "data" / "cases" / "lock_held_across_future_wait"


def test_one_lock_held_across_a_queue_get_prints_the_holders_get() -> None:
    # GIVEN next_batch's thread in Queue.get (under `_take:44`) inside `with self._state_lock:`
    # (line 47), the decode thread at `with self._state_lock:` (line 39)
    doc = to_json(reanalyse(CAPTURE))
    top = doc["root_causes"][0]
    # THEN a lock cycle of BatchFeeder, its line the holder's get, not the producer's with-line
    assert (doc["verdict"], top["pattern"]) == ("hang", "lock-order-deadlock")
    assert top["proof"]["deciding"]["line"] == 44
    assert "self.q.get()" in top["proof"]["deciding"]["code"]


def test_one_lock_held_across_a_future_wait_prints_the_holders_wait() -> None:
    # GIVEN ModelCache.refresh in Future.result() inside `with self._mu:`, the loader (which holds
    # the Future) at `with self._mu:` in _loader (line 55)
    doc = to_json(reanalyse(CASE))
    deciding = doc["root_causes"][0]["proof"]["deciding"]
    # THEN the line is refresh's wait on the Future (line 63), not the loader's with-line
    assert (deciding["function"], deciding["line"]) == ("ModelCache.refresh", 63)
