"""Red-team round 9's two logging-handler lock misses, on real captures recorded live after the fix
(tests/data/captures/README.md), each with the variant where the answer must change.

A thread that joins another thread (here through QueueListener.stop) while it holds a lock that the
joined thread waits to take is one half of a cycle: lock-order-deadlock, the joiner's line the
culprit. A thread waiting for a lock that a library frame lower on its own stack holds on the same
object (logging's Handler.handle around emit) waits for itself: lock-self-deadlock, and the other
threads waiting for it are its victims.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
JOINED = CAPTURES / "queue_listener_joined_under_lock"
REENTERED = CAPTURES / "log_handler_own_lock_reentered"


def _top(diag: Diagnosis) -> tuple[str, str | None, str | None, tuple[str, int] | None]:
    cause = diag.causes[0] if diag.causes else None
    node = cause.culprits[0] if cause is not None and cause.culprits else None
    frame = node.user_frame if node is not None else None
    return (diag.verdict, cause.pattern if cause else None, node.class_name if node else None,
            (frame.function, frame.line) if frame is not None else None)


def _threads(name: str, edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """An edit of every sample of the Trainer actor's thread called `name`."""
    def apply(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            if "Trainer" in str(proc.get("title")):
                for thread in proc["threads"]:
                    if str(thread.get("name") or "").startswith(name):
                        edit(thread)
    return apply


def test_a_join_inside_a_with_block_on_the_joined_threads_lock_is_a_lock_order_deadlock() -> None:
    # GIVEN Trainer.close_run at `self.listener.stop()` (Thread.join of the listener's Thread object)
    # inside `with self.state_lock:`, and the listener thread at its handler's `with self.state_lock:`
    diag = reanalyse(JOINED)
    # THEN the join and the lock make a cycle, the joiner's line the culprit
    assert _top(diag) == ("hang", "lock-order-deadlock", "Trainer", ("Trainer.close_run", 61))
    text = "\n".join(diag.causes[0].culprits[0].evidence)
    assert "it joins Thread-1 (_monitor)" in text
    assert "only the joiner can release it" in text


def test_a_joined_thread_known_only_by_its_name_is_not_joined(tmp_path: Path) -> None:
    # GIVEN the same stacks with no `self` on the listener thread's threading frames: nothing but
    # its name ties it to the Thread object MainThread joins
    def no_bootstrap_self(thread: dict[str, Any]) -> None:
        for frame in thread["frames"]:
            if (frame.get("facts") or {}) and "threading.py" in frame["file"]:
                frame["facts"].pop("self", None)
    edited = capture_variant(tmp_path, JOINED, stacks=_threads("Thread-1", no_bootstrap_self))
    # THEN no cycle is claimed
    assert _top(reanalyse(edited))[:2] != ("hang", "lock-order-deadlock")


def test_a_joiner_holding_no_lock_makes_no_cycle(tmp_path: Path) -> None:
    # GIVEN the joiner outside any `with` block (its close_run frame holds no lock)
    def outside_with(thread: dict[str, Any]) -> None:
        for frame in thread["frames"]:
            (frame.get("facts") or {}).pop("with", None)
    edited = capture_variant(tmp_path, JOINED, stacks=_threads("MainThread", outside_with))
    assert _top(reanalyse(edited))[1] != "lock-order-deadlock"


def test_a_handler_taking_its_own_lock_in_emit_deadlocks_itself_and_the_lock_waiter_is_its_victim() -> None:
    # GIVEN the listener thread at `with self.lock:` in MetricsFileHandler.emit, called from
    # Handler.handle (`self.emit(record)`, after `self.acquire()`) on the same handler object, and
    # MainThread at close_run's `with self.state_lock:` holding no lock
    diag = reanalyse(REENTERED)
    assert _top(diag) == ("hang", "lock-self-deadlock", "Trainer", ("MetricsFileHandler.emit", 40))
    text = "\n".join(diag.causes[0].culprits[0].evidence)
    assert "inside Handler.handle" in text and "this same thread, further up its stack" in text
    assert "thread MainThread waits" in text and "a victim" in text


def test_a_handle_frame_of_another_handler_object_holds_another_lock(tmp_path: Path) -> None:
    # GIVEN the same stack where Handler.handle's `self` is another handler than emit's
    def other_handler(thread: dict[str, Any]) -> None:
        for frame in thread["frames"]:
            if frame["function"] == "Handler.handle" and frame.get("facts"):
                frame["facts"]["self"] = "MetricsFileHandler@0x1"
    edited = capture_variant(tmp_path, REENTERED, stacks=_threads("Thread-1", other_handler))
    assert _top(reanalyse(edited))[1] != "lock-self-deadlock"
