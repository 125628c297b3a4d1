"""Round 15b, on real captures (redteam/report_renderer.py, redteam/ledger_compactor.py).

- pool_initializer_waits_for_later_set: a ThreadPoolExecutor's initializer waits on an Event the
  submitter sets only after `[f.result() for f in futs]`: event-never-set at the wait before the set.
- mp_lock_held_by_live_child_healthy: a thread waits on a multiprocessing.Lock a live forked child
  holds while it computes: not lock-abandoned (the twin ledger_writer's child has exited)."""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"


def test_pool_initializer_waiting_for_a_later_set_is_event_never_set() -> None:
    diag = reanalyse(CAPTURES / "pool_initializer_waits_for_later_set")
    assert diag.verdict == "hang", diag.summary
    node = next(n for n in diag.graph.nodes.values() if n.pattern == "event-never-set")
    assert node.fix_key == "set_after_pool_wait"
    assert any("in its initializer" in e and "line 44" in e for e in node.evidence), node.evidence


def test_a_multiprocessing_lock_a_live_child_may_hold_is_not_abandoned() -> None:
    diag = reanalyse(CAPTURES / "mp_lock_held_by_live_child_healthy")
    assert diag.verdict != "hang", diag.summary
    assert not any(n.pattern == "lock-abandoned" for n in diag.graph.nodes.values())
    assert any("child pid" in e and "alive" in e for n in diag.graph.nodes.values() for e in n.evidence)
