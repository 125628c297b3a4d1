"""Calls queued on an actor behind a waiting call release it only when one of them is a setter of
what it waits on (graph/events.py `_queued_setters`, the setters read from the class's source), on
real captures (tests/data/captures/README.md):

- `waiters_queued_behind_waiter/` (redteam/waiters_queued_behind_waiter.py): FeatureStore's two
  slots wait in `lookup` at `self.warm.wait()`; four more lookups are queued; only `mark_warm` sets
  it, and the driver calls it on the line after its `ray.get(lookups)`: set-order-deadlock, the driver.
- `waiters_queued_no_setter_caller/` (redteam/waiters_queued_no_setter_caller.py): the same waits and
  queued lookups, and nobody calls `mark_warm`: event-never-set on FeatureStore.
- `concurrency_group_queued/` (redteam/concurrency_group_queued.py): Checkpointer's `save` waits at
  `self.flushed.wait()` in the one slot of its group, `flush` (the setter) queued behind it: the
  queued call IS the setter, event-setter-queued stays; so does the recorded case
  `coordinator_waits_for_registrations` (`register` queued behind `wait_for_workers`).
- `async_waiters_queued_behind_waiter/`, `async_waiters_queued_no_setter_caller/` (the async twins,
  redteam/async_waiters_queued_*.py): the two slots of an async FeatureStore hold `lookup` coroutines
  suspended at `await self.warm.wait()` (an asyncio.Event; no stack), four more queued; the probe reads
  what `lookup` awaits and who sets it from the class's source (`Process.awaiting`,
  graph/events.py `_queued_async_setters`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.setters import setters_of
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
BEHIND = CAPTURES / "waiters_queued_behind_waiter"
NO_CALLER = CAPTURES / "waiters_queued_no_setter_caller"
ASYNC_BEHIND = CAPTURES / "async_waiters_queued_behind_waiter"
ASYNC_NO_CALLER = CAPTURES / "async_waiters_queued_no_setter_caller"
GROUP = CAPTURES / "concurrency_group_queued"
COORDINATOR = ROOT / "tests" / "data" / "cases" / "coordinator_waits_for_registrations"


def _top(folder: Path) -> tuple[str, str, list[str], dict[str, Any]]:
    doc = to_json(reanalyse(folder))
    top = doc["root_causes"][0]
    return doc["verdict"], top["pattern"], [c["kind"] for c in top["culprits"]], doc


def _evidence(folder: Path, class_name: str) -> str:
    """The evidence lines of the actor's graph node."""
    nodes = [n for n in reanalyse(folder).graph.nodes.values() if n.kind == "actor" and n.class_name == class_name]
    return "\n".join(e for n in nodes for e in n.evidence)


def test_waiters_queued_behind_a_waiter_are_the_drivers_set_order_deadlock() -> None:
    # GIVEN both slots of FeatureStore in `lookup` at `self.warm.wait()` (set only by mark_warm),
    # four more lookups queued, the driver in `ray.get(lookups)` with `mark_warm` on its next line
    verdict, pattern, kinds, doc = _top(BEHIND)
    # THEN the queued lookups are no setters: not event-setter-queued, but the driver's call order
    assert (verdict, pattern, kinds) == ("hang", "set-order-deadlock", ["driver"]), doc["summary"]
    assert "event-setter-queued" not in str(doc["root_causes"])
    assert "4 call(s) queued on this actor (FeatureStore.lookup x4) never set what it waits on: only " \
           "FeatureStore.mark_warm" in _evidence(BEHIND, "FeatureStore")


def test_waiters_queued_with_no_caller_of_the_setter_are_event_never_set() -> None:
    # GIVEN the same waits and queued lookups, mark_warm never called (the loader task FINISHED)
    verdict, pattern, _kinds, doc = _top(NO_CALLER)
    # THEN nothing will set it: event-never-set on FeatureStore at its wait, not event-setter-queued
    top = doc["root_causes"][0]
    assert (verdict, pattern) == ("hang", "event-never-set"), doc["summary"]
    assert [c["class_name"] for c in top["culprits"]] == ["FeatureStore"]
    assert top["proof"]["deciding"]["line"] == 34
    assert "event-setter-queued" not in str(doc["root_causes"])
    assert "none of the calls queued on it sets it" in _evidence(NO_CALLER, "FeatureStore")


def _queue_a_setter(tasks: list[dict[str, Any]]) -> None:
    queued = [t for t in tasks if t.get("name") == "FeatureStore.lookup" and not t.get("worker_pid")
              and t.get("state") != "RUNNING"]
    queued[-1]["name"] = queued[-1]["func_or_class_name"] = "FeatureStore.mark_warm"


def test_a_queued_call_of_the_setter_is_still_event_setter_queued(tmp_path: Path) -> None:
    # GIVEN the same readings, but one of the queued calls is `mark_warm` (the setter), queued behind the waiters
    variant = capture_variant(tmp_path, BEHIND, tasks=_queue_a_setter)
    verdict, pattern, kinds, doc = _top(variant)
    # THEN the setter cannot start until a waiter returns: event-setter-queued on FeatureStore
    assert (verdict, pattern, kinds) == ("hang", "event-setter-queued", ["actor"]), doc["summary"]
    assert "queued behind it (FeatureStore.mark_warm)" in _evidence(variant, "FeatureStore")


def test_the_setter_queued_in_the_waiters_concurrency_group_stays_event_setter_queued() -> None:
    # GIVEN Checkpointer.save at `self.flushed.wait()` (setters: Checkpointer.flush) in its group's only
    # slot, and a `flush` call queued behind it
    verdict, pattern, kinds, doc = _top(GROUP)
    # THEN the queued call is the setter: event-setter-queued on Checkpointer at its wait
    assert (verdict, pattern, kinds) == ("hang", "event-setter-queued", ["actor"]), doc["summary"]
    assert [c["class_name"] for c in doc["root_causes"][0]["culprits"]] == ["Checkpointer"]
    assert doc["root_causes"][0]["proof"]["deciding"]["line"] == 25
    assert "queued behind it (Checkpointer.flush)" in _evidence(GROUP, "Checkpointer")


def test_async_waiters_queued_behind_an_awaiting_call_are_the_drivers_set_order_deadlock() -> None:
    # GIVEN both slots of an async FeatureStore awaiting `self.warm` in `lookup` (no frame: coroutines),
    # four more lookups queued, the driver in `ray.get(lookups)` with `mark_warm` on its next line
    verdict, pattern, kinds, doc = _top(ASYNC_BEHIND)
    # THEN the queued lookups are no setters: the driver's call order, not event-setter-queued
    assert (verdict, pattern, kinds) == ("hang", "set-order-deadlock", ["driver"]), doc["summary"]
    assert "event-setter-queued" not in str(doc["root_causes"])
    assert "4 call(s) queued on this actor (FeatureStore.lookup x4) never resolve what its running call(s) await: " \
           "only FeatureStore.mark_warm" in _evidence(ASYNC_BEHIND, "FeatureStore")


def test_async_waiters_queued_with_no_caller_of_the_setter_are_async_await_stuck() -> None:
    # GIVEN the same awaits and queued lookups, mark_warm never called (the loader task FINISHED)
    verdict, pattern, _kinds, doc = _top(ASYNC_NO_CALLER)
    # THEN nothing resolves the await: async-await-stuck on FeatureStore at `await self.warm`
    top = doc["root_causes"][0]
    assert (verdict, pattern) == ("hang", "async-await-stuck"), doc["summary"]
    assert [c["class_name"] for c in top["culprits"]] == ["FeatureStore"]
    assert top["proof"]["deciding"]["line"] == 35
    assert "event-setter-queued" not in str(doc["root_causes"])


def test_a_queued_call_of_the_async_setter_is_still_event_setter_queued(tmp_path: Path) -> None:
    # GIVEN the async readings, but one of the queued calls is `mark_warm` (the setter)
    variant = capture_variant(tmp_path, ASYNC_BEHIND, tasks=_queue_a_setter)
    verdict, pattern, kinds, doc = _top(variant)
    # THEN it cannot start until an awaiting call returns: event-setter-queued on FeatureStore
    assert (verdict, pattern, kinds) == ("hang", "event-setter-queued", ["actor"]), doc["summary"]


def _coordinator_setters(setter: str) -> Any:
    def apply(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            for thread in proc["threads"]:
                for frame in thread["frames"]:
                    if frame["function"] == "Coordinator.wait_for_workers":
                        frame["setters"] = [setter]
    return apply


def test_the_recorded_registrations_queued_behind_the_wait_stay_event_setter_queued(tmp_path: Path) -> None:
    # GIVEN the recorded case (its frames read before the probe kept setters): register queued behind wait_for_workers
    verdict, pattern, kinds, _doc = _top(COORDINATOR)
    assert (verdict, pattern, kinds) == ("hang", "event-setter-queued", ["actor"])
    # AND with the setter the source shows (`register` sets all_registered): the queued call IS the setter
    variant = capture_variant(tmp_path, COORDINATOR, stacks=_coordinator_setters("Coordinator.register:47"))
    verdict, pattern, kinds, doc = _top(variant)
    # THEN it keeps its verdict and pattern
    assert (verdict, pattern, kinds) == ("hang", "event-setter-queued", ["actor"]), doc["summary"]


def test_queued_calls_of_no_setter_method_do_not_make_the_recorded_case_setter_queued(tmp_path: Path) -> None:
    # GIVEN the recorded case, its source naming another method (`open`) as the only setter
    variant = capture_variant(tmp_path, COORDINATOR, stacks=_coordinator_setters("Coordinator.open:47"))
    _verdict, _pattern, _kinds, doc = _top(variant)
    # THEN the queued registrations are not called the setters of the wait
    assert "event-setter-queued" not in str(doc["root_causes"]), doc["summary"]


def test_the_probe_names_a_method_that_sets_through_a_helper_on_self(tmp_path: Path) -> None:
    # GIVEN a barrier whose `arrive` sets the Event only through `self._release()` (a helper)
    src = tmp_path / "job.py"
    src.write_text(textwrap.dedent('''\
        import threading

        class Barrier:
            def __init__(self, n):
                self.n, self.seen, self.done = n, 0, threading.Event()

            def arrive(self):
                self.seen += 1
                if self.seen == self.n:
                    self._finish()
                self.done.wait()

            def _finish(self):
                self._release()

            def _release(self):
                self.done.set()

        class Other:
            def arrive(self):
                self._release()
    '''))
    # THEN its setters are the helper and every method of the class that reaches it on self
    assert setters_of(str(src), 11) == ["Barrier._release:17", "Barrier._finish:14", "Barrier.arrive:10"]
