"""A job found still starting is read again within the deadline, not handed back with "diagnose
again": on a loaded node an actor's worker takes seconds to start (the async_router_awaits example
once read as "InferenceRouter (pending) is not created yet" under CI load, captured in
tests/data/captures/router_actor_pending_under_load)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import ROOT

from debug_hang import pipeline
from debug_hang.pipeline import Diagnosis, Options, reanalyse

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"


def test_a_pending_actor_with_free_resources_marks_the_diagnosis_as_starting() -> None:
    # GIVEN the real reading of a job whose router actor was not placed yet, the CPU free
    diag = reanalyse(CAPTURES / "router_actor_pending_under_load")
    # THEN the verdict is the honest "still starting", and it says so in a field the pipeline reads
    assert diag.verdict == "inconclusive" and "still starting" in diag.summary, diag.summary
    assert diag.starting
    # AND a hung job's reading is not "starting"
    assert not reanalyse(CAPTURES / "pipe_stdin_and_stdout_both_full").starting


def _readings(monkeypatch: pytest.MonkeyPatch, answers: list[Diagnosis]) -> list[dict[str, Any]]:
    """Replace one reading of the cluster by the next recorded diagnosis; record each call."""
    calls: list[dict[str, Any]] = []

    def once(opts: Options, deadline: Any, started: float, notes: list[str], again: bool) -> Diagnosis:
        calls.append({"job_id": opts.job_id, "notes": list(notes), "again": again})
        return answers[len(calls) - 1]

    monkeypatch.setattr(pipeline, "_run_once", once)
    monkeypatch.setattr(pipeline.time, "sleep", lambda s: None)
    return calls


def test_a_starting_job_is_read_again_and_the_later_reading_is_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a first reading that finds the job starting, and a second that finds it hung
    starting, hung = reanalyse(CAPTURES / "router_actor_pending_under_load"), reanalyse(CAPTURES / "pipe_stdin_and_stdout_both_full")
    calls = _readings(monkeypatch, [starting, hung])
    # WHEN the pipeline runs
    diag = pipeline.run(Options(address="127.0.0.1:6379"))
    # THEN the second reading is the answer, read for the same job, and it knows why it was taken
    assert diag is hung and len(calls) == 2
    assert calls[1]["job_id"] == starting.job_id
    assert calls[1]["notes"] and "still starting" in calls[1]["notes"][0]


def test_readings_are_bounded_by_their_count_and_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a job that stays starting
    starting = reanalyse(CAPTURES / "router_actor_pending_under_load")
    calls = _readings(monkeypatch, [starting] * 10)
    # WHEN the pipeline runs with the default deadline, THEN it reads at most STARTING_READS times,
    # the last one told not to stop early (it writes the outputs)
    assert pipeline.run(Options(address="127.0.0.1:6379")) is starting
    assert len(calls) == pipeline.STARTING_READS and [c["again"] for c in calls][-1] is False
    # AND with less of the deadline left than a reading needs, it reads once
    calls.clear()
    pipeline.run(Options(address="127.0.0.1:6379", deadline_s=pipeline.STARTING_MIN_LEFT_S - 1))
    assert len(calls) == 1
