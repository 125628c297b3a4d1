"""A wait for a signal (signal.sigwait/pause) names the signal, on a real recorded capture.

`sigwait_no_sender/` is `redteam/sigwait_no_sender.py` diagnosed live: the task `export_when_told`
waits in `signal.sigwait({signal.SIGUSR1})`; its only sender signalled its own pid. No /proc reading
names who would send a signal, so the answer stays inconclusive — but it says what the wait is.
"""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "captures" / "sigwait_no_sender"


def test_a_sigwait_with_no_visible_sender_is_named_and_left_inconclusive() -> None:
    # GIVEN the live capture: export_when_told in signal.sigwait({SIGUSR1}), the sender FINISHED
    # WHEN it is re-analysed
    doc = to_json(reanalyse(CASE))
    # THEN inconclusive, the waiting task named with the signal it waits for, not "no pattern recognises"
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert "export_when_told (pid" in doc["summary"]
    assert "waits for SIGUSR1 (signal.sigwait)" in doc["summary"] and "who would send it is not visible" in doc["summary"]
    assert "no pattern recognises" not in doc["summary"]
