"""Deadlines and bounded calls: the diagnostic itself must never hang."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# A whole diagnosis normally takes a few seconds; 120 s leaves room for a slow, damaged cluster
# while still answering well within an incident's patience.
DEFAULT_DEADLINE_S = 120.0


class Deadline:
    """A point in time every step checks; `remaining()` bounds each external call."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.monotonic()
        self.end = self.start + seconds

    def remaining(self, cap: float | None = None, floor: float = 0.5) -> float:
        """Seconds left (at least `floor`, so a last call still gets a chance; at most `cap`)."""
        left = max(self.end - time.monotonic(), floor)
        return min(left, cap) if cap is not None else left

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def elapsed(self) -> float:
        return time.monotonic() - self.start


def call_with_timeout(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run `fn` in a daemon thread; raise TimeoutError naming `what` if it is not done in time.

    The thread is abandoned, not killed (Python cannot kill threads); it is a daemon so it never
    keeps the process alive. Use it only around calls with no timeout of their own.
    """
    result: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    worker = threading.Thread(target=run, name=f"debug-hang:{what[:40]}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TimeoutError(f"{what} did not finish within {timeout_s:.0f}s")
    if error:
        raise error[0]
    return result[0]


class PhaseTimer:
    """Wall time of each phase of a run, in order: `mark(name)` closes the phase that just ended."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.phases: dict[str, float] = {}

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.phases[name] = round(self.phases.get(name, 0.0) + now - self._last, 3)
        self._last = now
