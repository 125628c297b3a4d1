"""A wait with a timeout returns by itself (red-team round 6: two healthy jobs called hung).

`stop.wait(timeout=45)` is a ticker's sleep and `q.get(timeout=40)` a flush timer: a window of two
samples a second apart cannot show that such a wait never ends. On real captures recorded live
(tests/data/captures/README.md), each with the untimed variant where the answer must change.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
TICKER = CAPTURES / "timed_event_wait_ticker_healthy"
FLUSHER = CAPTURES / "timed_queue_get_flusher_healthy"

Edit = Callable[[dict[str, Any]], None]


def variant(tmp_path: Path, case: Path, edit: Edit) -> Path:
    """A copy of a capture with the actor's main thread edited in every sample, the live diagnosis dropped."""
    out = tmp_path / case.name
    shutil.copytree(case, out)
    (out / "diagnosis.json").unlink(missing_ok=True)
    doc = json.loads((out / "stacks.json").read_text())
    for proc in doc["processes"]:
        for thread in proc["threads"]:
            if proc.get("actor_class") and thread.get("name") == "MainThread":
                edit(thread["frames"])
    (out / "stacks.json").write_text(json.dumps(doc))
    return out


def untimed(frames: list[dict[str, Any]], inner_line: int, job_code: str, middle: tuple[int, str]) -> None:
    """The same wait without a timeout: Condition.wait's untimed branch, the job line without it."""
    frames[0].update(line=inner_line, code="waiter.acquire()")
    frames[1].update(line=middle[0], code=middle[1])
    frames[2].update(code=job_code)


def verdict_and_pattern(case: Path) -> tuple[str, str | None]:
    diag = reanalyse(case)
    return diag.verdict, (diag.causes[0].pattern if diag.causes else None)


def test_an_event_wait_with_a_timeout_is_not_a_hang_and_without_one_it_is(tmp_path: Path) -> None:
    # GIVEN an actor whose only job thread ticks in `stop_event.wait(timeout=period_s)` (healthy)
    assert verdict_and_pattern(TICKER) == ("inconclusive", "event-wait")
    # WHEN the same wait has no timeout, nothing of this process can set the event: a hang
    edited = variant(tmp_path, TICKER, lambda f: untimed(f, 327, "if self.stop_event.wait():",
                                                          (629, "signaled = self._cond.wait(timeout)")))
    assert verdict_and_pattern(edited) == ("hang", "event-never-set")


def test_a_queue_get_with_a_timeout_is_not_a_producer_gone_and_without_one_it_is(tmp_path: Path) -> None:
    # GIVEN a shipper whose only job thread waits in `events.get(timeout=period_s)` and flushes on each timeout
    assert verdict_and_pattern(FLUSHER) == ("inconclusive", "queue-get-wait")
    edited = variant(tmp_path, FLUSHER, lambda f: untimed(f, 327, "self.batch.append(self.events.get())",
                                                           (171, "self.not_empty.wait()")))
    assert verdict_and_pattern(edited) == ("hang", "producer-gone")


def test_the_timeout_is_read_from_the_job_line_when_the_wait_has_no_frame_of_its_own(tmp_path: Path) -> None:
    # GIVEN the ticker's stack cut at the job line (a C-level wait, e.g. lock.acquire(timeout=5), has no
    # stdlib frame): the job line's `timeout=` alone says that the wait returns by itself
    def cut(frames: list[dict[str, Any]]) -> None:
        del frames[:2]
    assert verdict_and_pattern(variant(tmp_path, TICKER, cut))[0] != "hang"


def test_the_live_runs_said_what_the_re_analysis_says() -> None:
    for case in (TICKER, FLUSHER):
        live = json.loads((case / "diagnosis.json").read_text())
        assert live["verdict"] == "inconclusive", case.name
