"""A timed wait in a loop that only waits again is no timed wait, on a real capture
(tests/data/captures/condition_notify_wrong_lock, redteam/condition_notify_wrong_lock.py, round
14b): ShardIndex.lookup loops `while not self.ready.wait_for(pred, timeout=5):` with only a
print in its body; the loader thread, the only one that advances the predicate, died in
`self.ready.notify_all()` (RuntimeError: it held another lock). The timeout ends one round,
never the loop: nothing left in the process will signal it (event-never-set)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.graph.threads import rewait_loop
from debug_hang.model import Frame, Thread
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "condition_notify_wrong_lock"
HEADER = "45:             while not self.ready.wait_for(lambda: self.loaded >= self.n_shards, timeout=5):"
AFTER = ["47:             return self.rows[key // 100][key % 100]", "48: "]


def _verdict(folder: Path) -> tuple[str, str, int | None]:
    doc = to_json(reanalyse(folder))
    top = doc["root_causes"][0]
    return doc["verdict"], top["pattern"], top["proof"]["deciding"]["line"]


def test_a_rewait_loop_whose_only_notifier_died_is_hung() -> None:
    # GIVEN lookup in Condition.wait (timed) inside `while not self.ready.wait_for(..., timeout=5):`
    # whose body only prints, the loader thread gone with its RuntimeError in the worker's log
    verdict, pattern, line = _verdict(CAPTURE)
    # THEN hung: nothing will signal the condition, the line the dead notifier raised at
    assert (verdict, pattern) == ("hang", "event-never-set")
    assert line == 41  # `self.ready.notify_all()` in _load


def test_a_loop_that_works_between_its_timed_waits_stays_open(tmp_path: Path) -> None:
    # GIVEN the same readings, but the loop's body does work between the waits (a ticker)
    def works(doc: dict[str, Any]) -> None:
        for p in doc["processes"]:
            for t in p["threads"]:
                for f in t["frames"]:
                    if f["function"] == "ShardIndex.lookup" and f.get("context"):
                        f["context"] = [c if not c.startswith("46:") else "46:                 self._refresh()"
                                        for c in f["context"]]
    verdict, pattern, _line = _verdict(capture_variant(tmp_path, CAPTURE, stacks=works))
    # THEN a timed wait of a loop that does rounds is not proven stuck
    assert verdict != "hang" and pattern != "event-never-set", (verdict, pattern)


@pytest.mark.parametrize(("body", "rewaits"), [
    (['46:                 print(f"still loading: {self.loaded}", flush=True)'], True),
    (["46:                 log.info('waiting')", "47:                 continue"], True),
    (["46:                 logger.warning(", "47:                     'still waiting %s', self.loaded)"], True),
    (["46:                 self._refresh()"], False),
    (["46:                 n += 1"], False),
    (["46:                 if self.closed:", "47:                     break"], False),
])
def test_rewait_loop_reads_whether_the_body_only_logs(body: list[str], rewaits: bool) -> None:
    # GIVEN a `while not X.wait_for(..., timeout=5):` header and its body, as the probe's context lines
    frame = Frame(function="S.lookup", file="s.py", line=45, code=HEADER.split(": ", 1)[1].strip(),
                  context=["44:         with self.ready:", HEADER, *body,
                           *[f"{48 + i}:{c.split(':', 1)[1]}" for i, c in enumerate(AFTER)]])
    thread = Thread(name="Dummy-1", frames=[frame])
    # THEN it is a re-wait only when the body changes nothing
    assert (rewait_loop(thread) is not None) is rewaits


def test_a_body_cut_off_by_the_context_is_not_read_as_a_rewait() -> None:
    # GIVEN the header and a log line, but the context ends before the loop does
    frame = Frame(function="S.lookup", file="s.py", line=45, code="while not self.ready.wait(5):",
                  context=["45:             while not self.ready.wait(5):", "46:                 print('waiting')"])
    # THEN unknown: the rest of the body may do work
    assert rewait_loop(Thread(frames=[frame])) is None
