"""State API readings bounded at scale: unfinished rows of every job first, the job's own rows
merged in later without duplicates, incomplete lists recorded and weighed (collect/state.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT

from debug_hang.analyse.patterns import settings
from debug_hang.collect.state import JobRows, ListResult, merge_job_rows
from debug_hang.pipeline import load_capture, reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.snapshot import Snapshot

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"
SCHEMA = json.loads((ROOT / "references" / "diagnosis.schema.json").read_text())


def _as_two_readings(snap: Snapshot) -> tuple[Snapshot, JobRows]:
    """A recorded snapshot as the two filtered readings would have returned it."""
    unfinished = Snapshot.from_dict({**snap.to_dict(),
                                     "tasks": [t for t in snap.tasks if t.get("state") != "FINISHED"],
                                     "actors": [a for a in snap.actors if a.get("state") != "DEAD"]})
    return unfinished, JobRows(tasks=ListResult(rows=list(snap.tasks), total=len(snap.tasks)),
                               actors=ListResult(rows=list(snap.actors), total=len(snap.actors)))


def _key(task: dict[str, object]) -> tuple[object, object]:
    return task.get("task_id"), task.get("attempt_number")


@pytest.mark.parametrize("case", ["healthy_slow", "hangs_after_warmup", "dead_rank", "queue_consumer_died"])
def test_merged_readings_hold_what_one_unfiltered_reading_held(case: str) -> None:
    # GIVEN a recorded snapshot split into the unfinished reading and the job's own rows
    snap = load_capture(CASES / case).snapshot
    first, own = _as_two_readings(snap)
    assert len(first.tasks) < len(snap.tasks)  # the first reading really left finished tasks out
    # WHEN they are merged
    before = len(first.tasks) + len(first.actors)
    added = merge_job_rows(first, own)
    # THEN every row is there once, as first read
    assert added == len(snap.tasks) + len(snap.actors) - before
    assert sorted(map(_key, first.tasks), key=str) == sorted(map(_key, snap.tasks), key=str)
    assert len({_key(t) for t in first.tasks}) == len(first.tasks)
    assert {a.get("actor_id") for a in first.actors} == {a.get("actor_id") for a in snap.actors}
    assert not first.truncated


def test_a_task_that_ended_after_the_first_reading_is_not_back_dated() -> None:
    # GIVEN a task first seen RUNNING, FINISHED in the job's later reading, and a task that
    # started and ended between the two readings
    snap = load_capture(CASES / "healthy_slow").snapshot
    first, own = _as_two_readings(snap)
    running = next(t for t in first.tasks if t.get("state") == "RUNNING")
    later = snap.taken_at * 1000 + 500
    own.tasks.rows = [{**running, "state": "FINISHED", "end_time_ms": later},
                      {**running, "task_id": "new" + str(running["task_id"])[3:], "state": "FINISHED",
                       "end_time_ms": later}]
    # WHEN merged
    merge_job_rows(first, own)
    # THEN the snapshot still shows the moment it was taken (the progress window compares with it)
    assert [t.get("state") for t in first.tasks if _key(t) == _key(running)] == ["RUNNING"]
    assert not any(str(t.get("task_id")).startswith("new") for t in first.tasks)


def test_a_cut_job_list_is_recorded_and_makes_every_finding_less_sure(tmp_path: Path) -> None:
    # GIVEN a recorded hang, and the same capture whose job task list the server cut at 40 rows
    case = CASES / "gloo_skipped_allreduce"
    plain = reanalyse(case)
    shutil.copytree(case, tmp_path / "c")
    snap = json.loads((tmp_path / "c" / "snapshot.json").read_text())
    first, own = _as_two_readings(Snapshot.from_dict(snap))
    own.tasks.total, own.tasks.after_source, own.tasks.matched = 120, 120, 120
    merge_job_rows(first, own)
    snap["truncated"] = first.truncated
    (tmp_path / "c" / "snapshot.json").write_text(json.dumps(snap))
    # WHEN it is re-analysed
    cut = reanalyse(tmp_path / "c")
    # THEN the cut is in diagnosis.json and each finding lost the catalog's penalty, nothing else moved
    doc = to_json(cut)
    jsonschema.validate(doc, SCHEMA)
    assert doc["collection"]["truncated"] == {"tasks_of_job": {"returned": len(own.tasks.rows), "total": 120,
                                                               "matched": 120}}
    assert cut.verdict == plain.verdict and [c.pattern for c in cut.causes] == [c.pattern for c in plain.causes]
    assert plain.causes and [round(c.confidence, 6) for c in cut.causes] == [
        round(max(0.0, c.confidence - settings().truncated_penalty), 6) for c in plain.causes]
    assert "truncated" not in to_json(plain)["collection"]
