"""A crash loop of child processes, on a real capture (tests/data/captures/README.md), with the
variants where the answer must change.

A process waiting on its children (multiprocessing.Pool's map) while they exit and are replaced
within the window, its log repeating one traceback, is a crash loop of its children: the parent
is the culprit, the repeated exception its children's death. Children that exit without a
repeated traceback (workers recycled after N tasks) are not a crash loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.crashloop import DEATH_PREFIX
from debug_hang.pipeline import reanalyse
from debug_hang.probe.logtext import TRACEBACK_HEADER, repeated_exceptions

pytestmark = pytest.mark.unit

LOOP = ROOT / "tests" / "data" / "captures" / "pool_initializer_children_crash_loop"
RAISED = "FileNotFoundError: [Errno 2] No such file or directory: '/models/ocr/crnn-v3.bin'"


def culprits(diag: Any) -> list[tuple[str, list[str]]]:
    return [(c.pattern, [n.name for n in c.culprits]) for c in diag.causes]


def _log_windows(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [log for info in doc["meta"]["info"] for log in (info.get("progress") or {}).get("logs") or []]


def test_children_dying_with_one_traceback_are_their_parents_crash_loop() -> None:
    # GIVEN an actor in Pool.map whose pool's initializer raises in every worker: its children
    # are listed and gone within the window, its stderr ends the same traceback again and again
    diag = reanalyse(LOOP)
    # THEN a hang: a crash loop of the children, the parent the culprit, the exception quoted
    assert diag.verdict == "hang"
    assert culprits(diag)[0] == ("crash-loop", ["OcrEval"])
    assert RAISED in diag.summary
    assert f"{DEATH_PREFIX}{RAISED}" in diag.causes[0].evidence


def test_children_that_exit_without_a_repeated_traceback_are_no_crash_loop(tmp_path: Path) -> None:
    # GIVEN the same capture with no traceback in the log read in the window (children that
    # exit quietly, as a pool with maxtasksperchild recycles healthy workers)
    def quiet(doc: dict[str, Any]) -> None:
        for log in _log_windows(doc):
            log.pop("exceptions", None)
            for part in ("tail", "new"):
                log[part] = [x for x in log.get(part) or [] if TRACEBACK_HEADER not in str(x) and RAISED not in str(x)]
    diag = reanalyse(capture_variant(tmp_path, LOOP, quiet))
    # THEN no crash loop, and no hang on the churn alone
    assert all(p != "crash-loop" for p, _ in culprits(diag))
    assert diag.verdict != "hang"


def test_a_repeated_traceback_without_children_gone_is_no_crash_loop(tmp_path: Path) -> None:
    # GIVEN the same capture with its children alive at both readings (none replaced)
    def alive(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            if info.get("child_of") is not None:
                info["run_state"] = ["S", "S"]
    diag = reanalyse(capture_variant(tmp_path, LOOP, alive))
    # THEN the repeated traceback alone does not make the children a crash loop
    assert all(p != "crash-loop" for p, _ in culprits(diag))


def test_the_probe_counts_the_exception_lines_that_end_tracebacks() -> None:
    # GIVEN the actor's .err log as the live run read it
    log = next((LOOP / "logs").glob("actor-*.err")).read_text().splitlines()
    found = repeated_exceptions(log)
    # THEN the one exception every worker died of, counted once per traceback it ends (two
    # workers' tracebacks interleave in the shared stderr: a header cut short by another is not counted)
    headers = sum(1 for line in log if line.startswith(TRACEBACK_HEADER))
    assert found[0]["line"] == RAISED
    assert 3 <= found[0]["count"] <= headers
    assert len(found) == 1
    assert repeated_exceptions(log[:13]) == []  # one traceback is no repetition


DRIVER_LOOP = ROOT / "tests" / "data" / "captures" / "driver_pool_initializer_children_crash_loop"
DRIVER_RAISED = "FileNotFoundError: [Errno 2] No such file or directory: '/models/thumbs/encoder-v2.bin'"
RECYCLED = ROOT / "tests" / "data" / "captures" / "pool_maxtasksperchild_recycled_healthy"
RECYCLED_MAP = ROOT / "tests" / "data" / "captures" / "pool_maxtasksperchild_map_healthy"


def test_the_driver_whose_children_crash_loop_is_the_culprit() -> None:
    # GIVEN the job's entrypoint script itself in Pool.map, its pool's initializer raising in every
    # worker: the driver has no actor or task id, its log is the job's driver log
    diag = reanalyse(DRIVER_LOOP)
    # THEN a hang: the crash loop of its children, the driver the culprit (its own reads and log
    # lines are the loop's, not work), and the exception its children die of quoted
    assert diag.verdict == "hang", diag.summary
    top = diag.causes[0]
    assert top.pattern == "crash-loop"
    assert [n.kind for n in top.culprits] == ["driver"]
    assert diag.graph.loop_of(top.culprits[0]) is not None
    assert DRIVER_RAISED in diag.summary
    assert f"{DEATH_PREFIX}{DRIVER_RAISED}" in top.evidence


def test_the_driver_whose_children_exit_quietly_is_no_crash_loop(tmp_path: Path) -> None:
    # GIVEN the driver's capture with no traceback in the log windows (children recycled quietly)
    def quiet(doc: dict[str, Any]) -> None:
        for log in _log_windows(doc):
            log.pop("exceptions", None)
            for part in ("tail", "new"):
                log[part] = [x for x in log.get(part) or [] if TRACEBACK_HEADER not in str(x) and DRIVER_RAISED not in str(x)]
    diag = reanalyse(capture_variant(tmp_path, DRIVER_LOOP, quiet))
    # THEN no crash loop and no hang
    assert all(p != "crash-loop" for p, _ in culprits(diag))
    assert diag.verdict != "hang"


@pytest.mark.parametrize("case", [RECYCLED, RECYCLED_MAP], ids=["imap", "map"])
def test_a_pool_recycling_its_workers_after_each_task_is_no_hang(case: Path) -> None:
    # GIVEN a healthy driver on Pool(maxtasksperchild=1) (imap: it waits in IMapIterator.next;
    # map: in Pool.map): its workers compute a task each and exit, new ones replace them, no traceback
    diag = reanalyse(case)
    # THEN no hang and no crash loop: the driver waits on its children (not on an event nobody
    # sets), and children that compute, or exit within the window, are work in flight
    assert diag.verdict != "hang", diag.summary
    assert all(p not in ("crash-loop", "event-never-set") for p, _ in culprits(diag))
    driver = next(n for n in diag.graph.nodes.values() if n.kind == "driver")
    assert driver.pattern == "child-process-wait"
