"""Waits released by a timer, on real recorded captures: the summary says the release is scheduled.

`timer_sets_the_event_later/` (`redteam/scheduled_warmup_timer.py`) and `healthy_embargo_timer_event/`
(`redteam/healthy_embargo_timer_event.py`): an actor's call waits on a threading.Event whose setter is
a `threading.Timer` of the same process (its thread in `Timer.run` → `Event.wait(N)`).
`healthy_async_call_later_future/` (`redteam/healthy_async_call_later_future.py`): an async actor's
calls await a Future that `loop.call_later(420, fut.set_result, True)` resolves; the loop is idle
with one timer due. The verdict stays inconclusive (never hang); the summary no longer reads "no
known setter" (a bug-like wording) but names the timer and when it is due.
"""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"


def test_an_event_a_timer_of_the_process_sets_is_a_scheduled_release() -> None:
    # GIVEN WarmStart waiting on `self.ready`, its Timer thread in Event.wait(120), and its source
    # `threading.Timer(delay_s, self.ready.set).start()` right above the wait
    # WHEN it is re-analysed
    doc = to_json(reanalyse(CAPTURES / "timer_sets_the_event_later"))
    # THEN inconclusive, released by that timer within its interval, no "no known setter"
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "scheduled release" in doc["summary"] and "≤120 s" in doc["summary"], doc["summary"]
    assert "self.ready.set" in doc["summary"] and "no known setter" not in doc["summary"]


def test_an_embargo_timer_event_is_a_scheduled_release() -> None:
    # GIVEN ResultsPublisher.publish waiting on `self.embargo_over`, its `embargo-timer` Timer thread
    # in Event.wait(420)
    doc = to_json(reanalyse(CAPTURES / "healthy_embargo_timer_event"))
    # THEN inconclusive, released by a timer in ≤420 s
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "released by a timer in ≤420 s" in doc["summary"] and "no known setter" not in doc["summary"]


def test_a_future_the_loop_resolves_with_call_later_is_a_scheduled_release() -> None:
    # GIVEN RolloutGate's enter() calls awaiting a Future, the loop idle with one timer due in ~420 s
    doc = to_json(reanalyse(CAPTURES / "healthy_async_call_later_future"))
    # THEN inconclusive, released by a timer in ≤420 s (a loop.call_later), never a hang
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "released by a timer in ≤420 s" in doc["summary"] and "call_later" in doc["summary"]
    assert "no known setter" not in doc["summary"]
