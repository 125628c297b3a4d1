"""A victim is never named as the culprit for what another process holds, on real red-team
captures (tests/data/captures/README.md): a native semaphore wait is not a lock the waiter holds
itself, and a thread seen owning the GIL in one sample is not a GIL holder that blocks the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from debug_hang.analyse.patterns import match_process
from debug_hang.pipeline import load_capture, reanalyse

pytestmark = pytest.mark.unit
CAPTURES = Path(__file__).resolve().parent / "data" / "captures"


def _culprits(diag: object) -> list[tuple[str, list[str | None]]]:
    return [(c.pattern, [n.class_name or n.task_name for n in c.culprits]) for c in diag.causes]  # type: ignore[attr-defined]


def test_a_ctypes_sem_wait_is_a_native_wait_not_a_lock_the_waiter_holds() -> None:
    # GIVEN benchmark in `slot.acquire()`, the job's own method, inside `self.libc.sem_wait(self.sem)`
    # (a named POSIX semaphore through ctypes), and Profiler DEAD after its call FAILED
    folder = CAPTURES / "native_sem_wait_holder_died"
    cap = load_capture(folder)
    bench = next(p for p in cap.collection.latest() if p.title == "ray::benchmark")
    # THEN the thread waits at the innermost line, the C call, not at the job's `.acquire(` call
    verdict = match_process(bench)
    assert verdict.pattern == "native-condition-wait"
    assert verdict.main is not None and verdict.main.frame is not None and "sem_wait" in (verdict.main.frame.code or "")
    # AND the waiter is a victim: no lock-self-deadlock; the dead process of the job is the likely holder
    diag = reanalyse(folder)
    found = _culprits(diag)
    assert all(p != "lock-self-deadlock" for p, _ in found), found
    assert found[0] == ("native-wait-holder-died", ["Profiler"]), found
    assert all("benchmark" not in names for _, names in found), found
    bench_node = next(n for n in diag.graph.nodes.values() if n.task_name == "benchmark")
    assert any("another process holds it" in e for e in bench_node.evidence), bench_node.evidence
    assert all(e.guessed for e in diag.graph.edges if e.why == "native-wait-holder-died")


def test_a_gil_owner_seen_in_one_sample_only_is_no_culprit() -> None:
    # GIVEN RolloutWorker 11116 whose Serve metrics thread py-spy marked owning the GIL in its last
    # sample only (mid-call setting a gauge), its main thread waiting on the Tokenizer replica like
    # its siblings'
    folder = CAPTURES / "gil_owner_caught_once"
    diag = reanalyse(folder)
    found = _culprits(diag)
    # THEN the replica is the one cause, and the worker waits on it with the others
    assert [p for p, _ in found] == ["serve-replica-stuck"], found
    worker = next(n for n in diag.graph.nodes.values() if n.pid == 11116)
    assert worker.pattern != "gil-holder-blocked"
    assert any(e.src == worker.key for e in diag.graph.edges)
