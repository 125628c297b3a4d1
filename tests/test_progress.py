"""Progress signals and crash loops, re-read from real recorded captures.

Each capture under tests/data/cases/ was recorded from a real run (tests/test_examples.py with
DEBUG_HANG_RECORD=1). Where a test asks "what if this reading had been silent", it zeroes that
reading in a copy of the real capture: the rest of the capture stays what the cluster said.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.analyse.crashloop import death_reason, find_crash_loops
from debug_hang.analyse.progress import ProcessProgress, load_rules, log_readings, loop_moved, rules
from debug_hang.errors import BadInputError
from debug_hang.model import Collection, stacks_from_dict
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.rows import ActorRow, tasks_of
from debug_hang.snapshot import Snapshot

pytestmark = pytest.mark.unit
CASES = ROOT / "tests" / "data" / "cases"


def case(name: str) -> Path:
    path = CASES / name
    if not (path / "stacks.json").exists():
        pytest.skip(f"no recorded {name} capture")
    return path


def signal_of(signals: list[ProcessProgress], name: str) -> ProcessProgress:
    return next(s for s in signals if s.name.startswith(name))


def silenced(src: Path, tmp_path: Path, keep_logs: bool = False) -> Path:
    """A copy of a capture whose progress readings say nothing moved (io zero, no new log line)."""
    dest = tmp_path / src.name
    shutil.copytree(src, dest)
    doc = json.loads((dest / "stacks.json").read_text())
    for info in doc["meta"]["info"]:
        window: dict[str, Any] | None = info.get("progress")
        if not window or window.get("exited"):
            continue
        window["io"] = {k: 0 for k in window.get("io", {})}
        if not keep_logs:
            for log in window.get("logs", []):
                log.update(bytes=0, lines=0, new=[], age_s=3600.0)
    (dest / "stacks.json").write_text(json.dumps(doc))
    return dest


# ------------------------------------------------------------------ a healthy throttled upload
def test_throttled_upload_is_progressing_by_disk_and_log_counter() -> None:
    # GIVEN a trainer in a throttled checkpoint upload: task table frozen, stacks in time.sleep
    diag = reanalyse(case("throttled_checkpoint_upload"))
    # THEN it is not hung: it wrote to disk and its progress counter advanced in the window
    assert diag.verdict == "no-hang", diag.summary
    trainer = signal_of(diag.signals, "Trainer")
    assert {"disk-write", "log-counter"} <= {f.signal for f in trainer.deciding("progress")}
    assert "saved chunk" in diag.summary and "to disk" in diag.summary
    assert not diag.causes


def test_the_rate_limiter_sleep_reads_as_a_throttle_not_a_poll() -> None:
    diag = reanalyse(case("throttled_checkpoint_upload"))
    trainer = next(v for v in diag.verdicts if v.process.actor_class == "Trainer")
    assert trainer.pattern == "throttled-sleep"
    assert trainer.main is not None and trainer.main.frame is not None
    assert "sleep(" in (trainer.main.frame.code or "")
    # the readings it outranks: a poll, and the `.acquire(` caller line read as a lock wait
    assert {"poll-never-satisfied", "lock-wait"} & set(trainer.main.also)


def test_a_silent_throttle_is_inconclusive_never_a_hang(tmp_path: Path) -> None:
    # GIVEN the same capture as if nothing had moved in the window
    diag = reanalyse(silenced(case("throttled_checkpoint_upload"), tmp_path))
    # THEN a sleep that always ends is not called a hang on its stack alone
    assert diag.verdict == "inconclusive", diag.summary
    assert "computed time" in diag.summary


def test_the_driver_log_credits_forwarded_lines_to_their_process_only() -> None:
    diag = reanalyse(case("throttled_checkpoint_upload"))
    driver = next(s for s in diag.signals if s.name.startswith("driver"))
    # the "(Trainer pid=N) saved chunk" lines in the driver log are the Trainer's, counted there
    assert not any(f.signal.startswith("log") for f in driver.findings), driver.findings


# ------------------------------------------------------------------ a quiet disk writer
def test_quiet_export_is_kept_out_of_hang_by_its_disk_writes_alone() -> None:
    diag = reanalyse(case("quiet_shard_export"))
    assert diag.verdict == "no-hang", diag.summary
    export = signal_of(diag.signals, "export_shard")
    assert {f.family for f in export.deciding("progress")} == {"io"}
    assert "log" in export.silent  # it logged nothing: the disk alone decided


def test_quiet_export_without_its_disk_writes_is_the_poll_hang_it_looks_like(tmp_path: Path) -> None:
    diag = reanalyse(silenced(case("quiet_shard_export"), tmp_path))
    assert diag.verdict == "hang", diag.summary
    assert diag.causes[0].pattern == "poll-never-satisfied"
    assert any("silent for" in e for e in diag.causes[0].evidence)


def test_quiet_export_set_aside_as_at_work_is_still_progressing_by_its_disk_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the real quiet export, its poll cause set aside because its culprit was seen working
    # between samples (CI caught it so: "sleeps between the rounds of a loop that moves on")
    from debug_hang.analyse import analysis
    monkeypatch.setattr(analysis, "at_work", lambda cause, busy, tasks: "export_shard sleeps between the rounds "
                        "of a loop that moves on" if cause.pattern == "poll-never-satisfied" else "")
    diag = reanalyse(case("quiet_shard_export"))
    # THEN its disk writes still count as the job's progress (the culprit set aside still moves the
    # job): the summary says what moved, not only "computing"
    assert diag.verdict == "no-hang", diag.summary
    assert "progressing" in diag.summary and "to disk" in diag.summary, diag.summary


# ------------------------------------------------------------------ a true poll hang stays hung
def test_a_poll_that_is_never_satisfied_is_silent_and_stays_hung() -> None:
    diag = reanalyse(case("producer_never_produces"))
    if not diag.signals:
        pytest.skip("capture recorded before progress readings")
    assert diag.verdict == "hang", diag.summary
    top = diag.causes[0]
    assert top.pattern == "poll-never-satisfied"
    buffer = signal_of(diag.signals, "ReplayBuffer")
    assert buffer.read and buffer.strongest() is None, buffer.findings
    assert {"io", "log"} <= set(buffer.silent)
    # more independent silent readings, more confidence than the stack alone (0.85)
    assert top.confidence > 0.85


# ------------------------------------------------------------------ crash loops
def snapshot_of(name: str) -> Snapshot:
    return Snapshot.from_dict(json.loads((case(name) / "snapshot.json").read_text()))


def test_a_crash_loop_is_read_from_ray_state() -> None:
    snap = snapshot_of("crash_loop_actor")
    loops = find_crash_loops([ActorRow.of(a) for a in snap.actors], tasks_of(snap.tasks))
    (loop,) = loops.values()
    assert loop.kind == "actor" and loop.name == "ShardReader"
    assert loop.restarts >= rules().crash_loop.min_restarts
    assert loop.failed_attempts >= rules().crash_loop.min_failed_attempts
    assert loop.dead_workers, "the failed attempts name the workers that died"


def test_an_actor_that_never_ran_is_not_a_crash_loop() -> None:
    snap = snapshot_of("crash_loop_actor")
    actors = [{**a, "num_restarts": "0", "state": "PENDING_CREATION"} for a in snap.actors]
    tasks = [t for t in snap.tasks if t.get("state") != "FAILED"]
    assert find_crash_loops([ActorRow.of(a) for a in actors], tasks_of(tasks)) == {}


def test_crash_loop_capture_names_the_actor_and_quotes_its_death() -> None:
    diag = reanalyse(case("crash_loop_actor"))
    assert diag.verdict == "hang", diag.summary
    top = diag.causes[0]
    assert top.pattern == "crash-loop"
    assert top.culprits[0].class_name == "ShardReader"
    assert "still starting" not in diag.summary
    assert "Bus error" in diag.summary and "restarted" in diag.summary
    assert top.evidence[0].startswith("death reason: ")


def test_a_crash_loop_no_sample_caught_alive_is_still_the_culprit(tmp_path: Path) -> None:
    # GIVEN the same capture, but the actor's process died before either sample (listed ALIVE,
    # gone when py-spy came: the CI run of 2026-12-02 caught it so)
    def drop_actor(doc: dict[str, Any]) -> None:
        pid = next(p["pid"] for p in doc["processes"] if p["role"] == "actor")
        doc["processes"] = [p for p in doc["processes"] if p["pid"] != pid]
        doc["meta"]["errors"] = [{**e, "sample": 0} for e in doc["meta"]["errors"] if e["pid"] == pid]

    diag = reanalyse(capture_variant(tmp_path, case("crash_loop_actor"), stacks=drop_actor))
    # THEN the driver's ray.get still leads to the restarting actor, named with its deaths
    assert diag.verdict == "hang", diag.summary
    assert diag.causes[0].pattern == "crash-loop"
    assert diag.causes[0].culprits[0].class_name == "ShardReader"


def test_the_death_reason_is_found_in_a_dead_workers_log() -> None:
    logs = sorted((case("crash_loop_actor") / "logs").glob("*.dead-*.err"))
    assert logs
    assert death_reason([p.read_text() for p in logs]) == "Fatal Python error: Bus error"


def test_rays_own_lines_in_the_driver_log_are_not_progress() -> None:
    doc = json.loads((case("crash_loop_actor") / "stacks.json").read_text())
    driver = next(i for i in doc["meta"]["info"] if not str(i.get("title", "")).startswith("ray::"))
    window = driver["progress"]
    assert window["logs"][0]["lines"] > 0  # "(raylet) A worker died..." lines did arrive
    assert log_readings(window["logs"], rules().logs) == {}


# ------------------------------------------------------------------ log counters and loops
def test_a_counter_whose_only_change_is_a_time_is_a_heartbeat_not_progress() -> None:
    doc = json.loads((case("throttled_checkpoint_upload") / "stacks.json").read_text())
    trainer = next(i for i in doc["meta"]["info"] if str(i.get("title", "")).startswith("ray::Trainer"))
    log = dict(trainer["progress"]["logs"][0])
    last = log["tail"][-1]  # "saved chunk 7/600"
    heartbeat = {**log, "tail": [f"{last}, waited 3s"], "new": [f"{last}, waited 4s"]}
    assert "advancing_counters" not in log_readings([heartbeat], rules().logs)
    assert "advancing_counters" in log_readings([log], rules().logs)


def test_two_samples_in_the_same_sleep_did_not_move() -> None:
    doc = json.loads((case("throttled_checkpoint_upload") / "stacks.json").read_text())
    procs = [p for p in stacks_from_dict(doc) if p.actor_class == "Trainer" or (p.title or "").startswith("ray::Trainer")]
    coll = Collection(processes=procs)
    assert len(coll.processes) == 2
    assert loop_moved(procs) == ""
    assert loop_moved(procs[:1]) is None


def test_broken_rules_are_refused_with_a_clear_message(tmp_path: Path) -> None:
    bad = tmp_path / "rules.yaml"
    bad.write_text("schema: debug-hang/verdict-rules/v1\nsignals:\n  - {id: x, reading: nonsense, strength: progress}\n")
    with pytest.raises(BadInputError, match="reading"):
        load_rules(bad)
    bad.write_text("schema: debug-hang/verdict-rules/v1\nlogs:\n  counters: ['(']\n")
    with pytest.raises(BadInputError, match="invalid regular expression"):
        load_rules(bad)
    assert load_rules().signals


def test_no_hang_confidence_grows_with_the_independent_signals_that_agree() -> None:
    # io and log agree on the throttled upload; the quiet export has io alone
    upload = to_json(reanalyse(case("throttled_checkpoint_upload")))["progress"]["confidence"]
    export = to_json(reanalyse(case("quiet_shard_export")))["progress"]["confidence"]
    assert upload > export >= rules().confidence["progress_base"]


def test_a_task_retried_after_each_death_is_a_crash_loop() -> None:
    diag = reanalyse(case("crash_loop_task"))
    assert diag.verdict == "hang", diag.summary
    top = diag.causes[0]
    assert top.pattern == "crash-loop" and top.culprits[0].class_name == "decode_batch"
    assert "Segmentation fault" in diag.summary


def test_one_death_is_not_yet_a_crash_loop_nor_a_job_still_starting(tmp_path: Path) -> None:
    # GIVEN the task's capture as it was after its first death only (later attempts removed)
    src = case("crash_loop_task")
    dest = tmp_path / src.name
    shutil.copytree(src, dest)
    snap = json.loads((dest / "snapshot.json").read_text())
    failed = sorted((t for t in snap["tasks"] if t.get("state") == "FAILED"), key=lambda t: t["attempt_number"])
    snap["tasks"] = [t for t in snap["tasks"] if t.get("state") != "FAILED" or t is failed[0]]
    (dest / "snapshot.json").write_text(json.dumps(snap))
    (dest / "tasks_after.json").unlink(missing_ok=True)
    # WHEN re-analysed THEN it is neither a loop yet nor "still starting": it died and is retried
    diag = reanalyse(dest)
    assert diag.verdict == "inconclusive", diag.summary
    assert "another death makes it a crash loop" in diag.summary
    assert "still starting" not in diag.summary


def test_an_actor_restarted_once_is_a_loop_only_while_it_is_down() -> None:
    snap = snapshot_of("crash_loop_actor")
    one_death = [t for t in snap.tasks if t.get("state") != "FAILED"] + \
        [next(t for t in snap.tasks if t.get("state") == "FAILED")]
    alive = [{**a, "num_restarts": "1", "state": "ALIVE"} for a in snap.actors]
    assert find_crash_loops([ActorRow.of(a) for a in alive], tasks_of(one_death)) == {}  # it came back: recovered, not looping
    down = [{**a, "num_restarts": "1", "state": "RESTARTING"} for a in snap.actors]
    (loop,) = find_crash_loops([ActorRow.of(a) for a in down], tasks_of(one_death)).values()
    assert not loop.confirmed  # died once, being restarted: not yet a loop


@pytest.mark.parametrize("case", ["stdlib_queue_no_producer", "queue_producer_gone"])
def test_counter_logged_before_the_window_does_not_doubt_a_proven_dead_producer(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recorded real runs diagnosed ~6-8 s after the producer's last progress line: the producer is
    gone (its thread died / its task failed), so that earlier line does not make the hang doubtful."""
    from debug_hang.analyse import verdict

    folder = ROOT / "tests" / "data" / "cases" / case
    report = (folder / "report.md").read_text()
    assert "before the window" in report  # the capture really holds a recent counter
    assert to_json(reanalyse(folder))["verdict"] == "hang"
    # Without the rule (the same capture), the earlier counter would make it inconclusive.
    shipped = rules()
    import dataclasses

    monkeypatch.setattr(verdict, "rules", lambda: dataclasses.replace(shipped, proven_stuck=frozenset()))
    assert to_json(reanalyse(folder))["verdict"] == "inconclusive"


def test_proven_stuck_patterns_are_root_causes_of_the_catalog() -> None:
    from debug_hang.analyse.patterns import catalog

    r = rules()
    assert r.proven_stuck and r.before_window_signals
    for pattern in r.proven_stuck:
        assert catalog()[pattern].kind == "root-cause", pattern
    assert r.before_window_signals <= {s.id for s in r.signals}


def test_a_blocked_victims_own_writes_do_not_make_the_job_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray Tune's driver (blocked, waiting on its trials) writes its experiment state to disk while
    the trials' Simulator is stuck: seen live, 132 KiB in the window. Made from recorded rows: the
    Tune capture, with the disk reading of the throttled-upload Trainer (256 KiB written, recorded
    live) on the driver. Writes of a blocked victim do not release anything."""
    import time

    from debug_hang.analyse import analysis, verdict
    from debug_hang.pipeline import load_capture

    cases = ROOT / "tests" / "data" / "cases"
    writer = next(i["progress"] for i in load_capture(cases / "throttled_checkpoint_upload").collection.info.values()
                  if i.get("progress") and i["progress"]["io"]["write_bytes"] > 0)
    cap = load_capture(cases / "tune_trials_share_simulator")
    driver = next(p for p in cap.collection.processes if p.role == "driver")
    info = cap.collection.info[driver.ref]
    info["progress"] = {**info["progress"], "io": dict(writer["io"])}

    def run() -> str:
        return analysis.analyse(cap.job, cap.snapshot, cap.collection, cap.tasks_after, "", "", [], [], time.monotonic()).verdict

    assert run() == "hang"
    monkeypatch.setattr(verdict, "_can_move_the_job", lambda *_args: True)
    assert run() == "no-hang"  # the same input, with any process's writes counted as progress
