"""A put into a full queue.Queue is released only by a get on it, on real recorded captures.

`retry_requeue_full_queue/` (`redteam/retry_requeue_full_queue.py`): WarehouseWriter's only consumer
thread re-puts a failed batch into its own full `queue.Queue(maxsize=4)`; the 4 executor threads
block in `submit`'s put and 31 `submit` calls are queued behind them. The getter's put is the
culprit (queue-full-getter-puts), not a producer's, and the queued submits (which only put) are no
setter of anything (not event-setter-queued).
`healthy_slow_consumer_full_queue/` (`redteam/healthy_slow_consumer_full_queue.py`): the same full
queue and blocked submits, its consumer slow but draining: never a hang.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
HUNG = CAPTURES / "retry_requeue_full_queue"
HEALTHY = CAPTURES / "healthy_slow_consumer_full_queue"


def _culprit(doc: dict[str, Any]) -> tuple[str, str, int]:
    cause = doc["root_causes"][0]
    deciding = cause["proof"]["deciding"]
    return cause["pattern"], str(deciding["function"]), int(deciding["line"])


def test_the_getter_blocked_putting_into_its_own_full_queue_is_the_culprit() -> None:
    # GIVEN the consumer thread at `_consume:44 self.q.put(batch)` and 4 slot threads at
    # `submit:47 self.q.put(batch)`, all on the same Queue; the source gets from self.q only in _consume
    doc = to_json(reanalyse(HUNG))
    # THEN hang, culprit the consumer's put, not a producer's
    assert doc["verdict"] == "hang", doc["summary"]
    assert _culprit(doc) == ("queue-full-getter-puts", "WarehouseWriter._consume", 44), doc["root_causes"]
    assert "event-setter-queued" not in str(doc["root_causes"])
    # AND no producer's line is shown as the culprit's code
    code = doc["root_causes"][0]["proof"]["code"]
    assert all(c["line"] != 47 for c in code if c["role"] == "culprit"), code


def _strip_setters(doc: dict[str, Any]) -> None:
    for proc in doc["processes"]:
        for thread in proc["threads"]:
            for frame in thread["frames"]:
                frame["setters"] = None


def test_without_the_probe_reading_the_frame_context_names_the_getter(tmp_path: Path) -> None:
    # GIVEN the same capture without the probe's reading of the class (no `setters`): the consumer
    # frame's loop context still shows `batch = self.q.get()`
    doc = to_json(reanalyse(capture_variant(tmp_path, HUNG, stacks=_strip_setters)))
    # THEN the same answer
    assert doc["verdict"] == "hang", doc["summary"]
    assert _culprit(doc) == ("queue-full-getter-puts", "WarehouseWriter._consume", 44)


def _queued_renamed(name: str):  # type: ignore[no-untyped-def]
    def change(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row.get("state") == "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY":
                row["name"] = row["func_or_class_name"] = name
    return change


def test_a_queued_call_that_may_get_keeps_it_undecided(tmp_path: Path) -> None:
    # GIVEN the queued calls are of another method (`drain`), whose code is not seen blocked putting
    doc = to_json(reanalyse(capture_variant(tmp_path, HUNG, tasks=_queued_renamed("WarehouseWriter.drain"))))
    # THEN the getter is not called stuck for good: a queued call may still get
    assert "queue-full-getter-puts" not in str(doc["root_causes"]), doc["summary"]


def test_a_slow_consumer_is_not_a_hang() -> None:
    # GIVEN the healthy twin: the consumer computes in _encode between gets
    doc = to_json(reanalyse(HEALTHY))
    # THEN not hung
    assert doc["verdict"] != "hang", doc["summary"]


def _consumer_sleeps(doc: dict[str, Any]) -> None:
    """The consumer thread in its back-off `time.sleep(backoff)` (a C call: no frame of its own)."""
    for proc in doc["processes"]:
        for thread in proc["threads"]:
            if thread.get("name") != "warehouse-consumer":
                continue
            frames = [f for f in thread["frames"] if f["function"] != "WarehouseWriter._encode"]
            frames = frames[1:] if "tracing_helper" in frames[0]["file"] else frames
            consume = next(f for f in frames if f["function"] == "WarehouseWriter._consume")
            consume.update(line=58, code="time.sleep(backoff)")
            thread["frames"], thread["active"] = frames, False


def test_a_consumer_in_its_back_off_sleep_is_not_a_hang(tmp_path: Path) -> None:
    # GIVEN the healthy twin's consumer idle in its retry back-off sleep in every sample, the
    # submits blocked in put and more submits queued
    doc = to_json(reanalyse(capture_variant(tmp_path, HEALTHY, stacks=_consumer_sleeps)))
    # THEN not hung: the queued submits only put (no event-setter-queued), the getter is not blocked
    assert doc["verdict"] != "hang", (doc["summary"], doc["root_causes"])
    assert "event-setter-queued" not in str(doc["root_causes"])


def _strip_facts(doc: dict[str, Any]) -> None:
    for proc in doc["processes"]:
        for thread in proc["threads"]:
            for frame in thread["frames"]:
                frame["facts"] = frame["setters"] = None


def test_without_locals_the_queued_puts_are_no_setter(tmp_path: Path) -> None:
    # GIVEN the same capture read without --locals (no Queue identity, no probe reading)
    doc = to_json(reanalyse(capture_variant(tmp_path, HUNG, stacks=_strip_facts)))
    # THEN the queued submits, which only put, are not named the setter of the put-wait: no hang
    # with a producer's put as its culprit, but inconclusive (which Queue the threads share is unread)
    assert "event-setter-queued" not in str(doc["root_causes"]), doc["summary"]
    assert doc["verdict"] == "inconclusive", doc["summary"]


def test_the_probe_reads_the_getters_of_the_queue_a_line_puts_into(tmp_path: Path) -> None:
    import textwrap

    from debug_hang.probe.setters import setters_of

    src = tmp_path / "job.py"
    src.write_text(textwrap.dedent('''\
        import queue

        class Writer:
            def __init__(self):
                self.q = queue.Queue(maxsize=4)
                self.other = queue.Queue()

            def consume(self):
                while True:
                    item = self.q.get()
                    self.other.put(item)

            def drain(self):
                return self.q.get_nowait()

            def submit(self, item):
                self.q.put(item)

        class Other:
            def take(self):
                return self.q.get()
    '''))
    # a put's releasers: the methods of its own class that get from the same queue (not Other.take,
    # not a get from another queue), and nothing for a non-blocking put or a plain line
    assert setters_of(str(src), 17) == ["Writer.consume:10", "Writer.drain:14"]
    assert setters_of(str(src), 11) == []  # self.other is got from nowhere
    assert setters_of(str(src), 14) == []
