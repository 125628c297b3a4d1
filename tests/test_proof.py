"""The report proves its own claim: each root cause carries the code at the deciding line, the
failed call's traceback, the counts that show the stall, what stayed unchanged between samples
and what would prove it wrong — on recorded real captures, re-analysed, and on a folder written
again (its logs read back)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scale_capture import build

from debug_hang.analyse.patterns import catalog
from debug_hang.analyse.proof import raising_frame, tracebacks
from debug_hang.pipeline import load_capture, reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown
from debug_hang.report.write import write_outputs

pytestmark = pytest.mark.unit

CASES = Path(__file__).resolve().parent / "data" / "cases"
FIRST_SCREEN = 12  # lines: title, summary, culprit, line, mechanism, fix, links


def test_a_failed_producer_call_shows_its_traceback_and_the_line_that_raised() -> None:
    # GIVEN the recorded hang where the loader's produce() raised and the trainer waits on the queue
    diag = reanalyse(CASES / "queue_producer_gone")
    proof = diag.proofs[0]
    # THEN the traceback is the one Ray printed in the driver log for that pid, ending in the exception
    assert proof.failure is not None and proof.failure.source == "driver log"
    assert proof.failure.call == "DataLoaderWorker.produce"
    assert proof.failure.exception == "AttributeError: 'NoneType' object has no attribute 'lower'"
    assert "pid=5077" in proof.failure.traceback[0]
    # the deciding line is the job's line that raised, and the waiters' line comes with its context
    assert proof.deciding is not None and (proof.deciding.role, proof.deciding.line) == ("raised", 72)
    waiting = next(c for c in proof.code if c.role == "waiting")
    assert waiting.line == 89 and any(line.startswith("89: ") for line in waiting.context)
    # the counts: the producer's one call FAILED, the consumer's RUNNING, the queue's gets and puts
    calls = {c.name: c.states for c in proof.calls}
    assert calls["DataLoaderWorker.produce"] == {"FAILED": 1} and calls["Trainer.fit"] == {"RUNNING": 1}
    assert any(name.startswith("_QueueActor.") for name in calls)
    # the last line the producer printed, and how long before the window
    sign = next(s for s in proof.last_signs if s.who.startswith("DataLoaderWorker"))
    assert sign.text == "[loader] put batch 3 from shard-0002" and sign.seconds_before == pytest.approx(8.29)
    assert any("same stack in every sample" in u for u in proof.unchanged)
    assert proof.disproved_by == catalog()["producer-gone"].disproved_by


def test_the_first_screen_holds_verdict_culprit_line_mechanism_and_fix() -> None:
    report = render_markdown(reanalyse(CASES / "queue_producer_gone")).splitlines()
    top = "\n".join(report[:FIRST_SCREEN])
    assert "**hang**" in report[0]
    for label in ("- **Culprit**: DataLoaderWorker (pid 5077)", "- **Line**: `queue_producer_gone.py:72`",
                  "- **Mechanism**: ", "- **Fix**: ", "[graph.svg](graph.svg)", "[report.html](report.html)"):
        assert label in top, label
    # and the proof follows, before the rest of the report
    assert report.index("## Proof") < report.index("## Read next") < report.index("## Root cause")
    text = "\n".join(report)
    assert "AttributeError: 'NoneType' object has no attribute 'lower'" in text and "**Would prove it wrong**" in text


def test_a_thread_that_died_is_read_from_the_worker_log() -> None:
    proof = reanalyse(CASES / "prefetch_thread_died").proofs[0]
    assert proof.failure is not None and proof.failure.source == "worker log"
    assert proof.failure.traceback[0].startswith("Exception in thread") and proof.failure.exception == "KeyError: 'num_rows'"
    assert proof.deciding is not None and proof.deciding.role == "raised" and proof.deciding.function == "_fetch"


def test_a_process_that_dies_without_a_traceback_gives_its_death_reason() -> None:
    crash = reanalyse(CASES / "crash_loop_actor").proofs[0]
    assert crash.failure is not None and crash.failure.exception == "Fatal Python error: Bus error"
    raised = raising_frame(crash.failure.traceback)  # faulthandler's frames: "line N in f"
    assert raised is not None and raised.function == "read_batch" and raised.line == 62
    dead = reanalyse(CASES / "dead_rank").proofs[0]
    assert dead.failure is not None and "NaN in loss at step 4 on rank 3" in dead.failure.exception


def test_every_member_of_a_deadlock_cycle_shows_its_line() -> None:
    proof = reanalyse(CASES / "actor_call_cycle").proofs[0]
    members = {c.who.split(" ")[0]: c for c in proof.code if c.role == "culprit"}
    assert set(members) == {"ParameterServer", "Learner"}
    assert all(c.code and "ray.get(" in c.code and c.context for c in members.values())
    assert proof.failure is None and proof.mechanism.startswith("deadlock cycle: ")


def test_tracebacks_of_other_processes_in_the_driver_log_are_not_taken() -> None:
    text = (CASES / "queue_producer_gone" / "logs" / "driver.log").read_text()
    assert len(tracebacks(text, 5077)) == 1
    assert tracebacks(text, 5198) == []  # the trainer raised nothing


def test_every_recorded_hang_has_a_proof_that_fits_the_schema_and_names_its_culprit() -> None:
    for folder in sorted(p for p in CASES.iterdir() if (p / "stacks.json").exists()):
        diag = reanalyse(folder)
        doc = to_json(diag)
        for i, cause in enumerate(doc["root_causes"][:5]):
            proof = cause["proof"]
            assert proof is not None and proof["pattern"] == cause["pattern"], folder.name
            assert proof["disproved_by"] and proof["mechanism"], folder.name
            first = diag.causes[i].culprits[0].label()
            assert proof["culprit"].startswith(first), (folder.name, proof["culprit"], first)


def test_at_two_thousand_ranks_the_counts_say_how_many_are_stuck(tmp_path: Path) -> None:
    folder = build(tmp_path / "capture", ranks=2000, nodes=250, odd=(2, 1337))
    proof = reanalyse(folder).proofs[0]
    calls = {c.name: c.states for c in proof.calls}
    assert calls["TrainWorker.train"] == {"RUNNING": 1998, "FINISHED": 2}
    assert any(u.startswith("stacks: 2,001 of 2,001 process(es)") for u in proof.unchanged)
    assert "(and 1,998 more wait on it)" in proof.mechanism


def test_a_written_folder_reanalyses_to_the_same_proof(tmp_path: Path) -> None:
    # GIVEN a recorded folder re-analysed and written again (its logs under the names evidence.json gives)
    first = reanalyse(CASES / "queue_producer_gone")
    write_outputs(first, tmp_path / "again", load_capture(CASES / "queue_producer_gone").tasks_after)
    evidence = json.loads((tmp_path / "again" / "evidence.json").read_text())
    assert any(v.get("logs") for v in evidence["per_node"].values())
    # WHEN that folder is re-analysed  THEN the proof is the same, traceback included
    again = reanalyse(tmp_path / "again")
    assert [p.to_json() for p in again.proofs] == [p.to_json() for p in first.proofs]
