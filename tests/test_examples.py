"""End to end on a real cluster: each hanging example in examples/ is diagnosed by the script a
user runs (scripts/diagnose_ray_hang.sh), and diagnosis.json names the expected root cause.

Set DEBUG_HANG_RECORD=1 to store each run's capture under tests/data/cases/<example>/ (the
recorded real captures the unit tests and reference cases re-analyse).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, LocalCluster, culprit_matches, expected_of, read_json, run_script, stop_job, submit_example

from debug_hang import localcluster
from debug_hang.snapshot import Snapshot, calls_into_other_jobs, other_holders

pytestmark = pytest.mark.integration

SCHEMA = read_json(ROOT / "references" / "diagnosis.schema.json")
CASES = ROOT / "tests" / "data" / "cases"
RECORDED_FILES = ("snapshot.json", "stacks.json", "tasks_after.json", "report.md", "diagnosis.json", "evidence.json")
# Evidence that explains *why*, each gathered by the diagnosis itself:
# text the report must contain for that example.
EXPLAINS = {
    "dead_rank": ["NaN in loss at step 4 on rank 3"],  # the dead rank's reason, from its own log
    "gloo_skipped_allreduce": ["TrainWorker.train FINISHED", "skipping"],  # finished task + its warning
    "busy_loop": ["real CPU use"],  # the spinning thread's CPU
    "producer_never_produces": ["time.sleep"],  # the source line of the deciding frame
    "lock_order_deadlock": ["with self."],  # both `with lock:` lines
    "queue_producer_gone": ["FAILED"],  # the producer's failed task
    "stdlib_queue_no_producer": ["KeyError: 'label'"],  # the dead producer thread's error, from its log
    "reentrant_lock_del": ["dropped the last reference"],
    "dataloader_worker_hang": ["forked"],
    "idle_producer_never_called": ["never run a method"],
    "collective_mismatch": ["barrier called from"],
    "rendezvous_hang": ["has not started"],
    "socket_io_hang": ["sock.recv"],
    "prefetch_thread_died": ["KeyError: 'num_rows'"],  # the dead setter thread's error, from its log
    "coordinator_waits_for_registrations": ["queued behind it (Coordinator.register)"],
    "async_weight_store_wrong_instance": ["awaits an asyncio object"],
    "async_router_awaits": ["waits for GenerationEngine.generate"],  # through the async router
    "ray_train_early_stop": ["early stop at epoch 5"],  # the rank's own last words
    "ray_train_report_rank0": ["never reached the barrier"],
    "ray_train_eval_barrier": ["dist.barrier()"],
    "queue_consumer_died": ["TypeError"],  # the consumer's failed task
    "lock_held_across_remote_call": ["a lock held across a remote call"],
    "detached_service_never_published": ["WeightServer.pull"],  # the call into the other job's actor
    "secrets_in_the_job": ["Bearer [REDACTED]", "time.sleep"],  # the 401 warning, its token redacted
    # an actor whose handle went before the kill reached it is also REF_DELETED: "DEAD (RAY_KILL, REF_DELETED)"
    "sweep_leaked_placement_group": ["reserved in placement groups", "remove_placement_group", "DEAD (RAY_KILL"],
    "idle_evaluators_hold_cpus": ["no task running or queued on it", "ray.kill"],
    "run_dir_file_lock": ["/proc/locks", "/.lock", "fcntl.flock(fh, fcntl.LOCK_EX)"],  # the file and the line
    "crash_loop_actor": ["Bus error", "restarted"],  # the death reason from a dead worker's log
    "crash_loop_task": ["Segmentation fault", "attempt(s) FAILED"],
    "prefetcher_feeds_from_calls": ["sock.recv", "waits for ShardLoader.load_shard"],  # the driver reaches the task
    "gil_held_by_native_call": ["wait for the GIL, held by", "refresher"],  # py-spy's GIL owner, its waiters
}
# Healthy jobs kept out of `hang` by what their processes did in the window: text
# the summary must contain.
PROGRESS_SEEN = {
    "throttled_checkpoint_upload": ["progressing", "to disk", "saved chunk"],  # bytes + advancing counter
    "quiet_shard_export": ["progressing", "to disk"],  # the disk alone: no log, no finished task
}


# Task fields the analysis never reads; dropped from recordings to keep them small.
UNUSED_TASK_FIELDS = ("profiling_data", "runtime_env_info", "events", "label_selector", "fallback_strategy")


def trim_capture(folder: Path) -> None:
    """Keep a recorded snapshot to the diagnosed job's own actors and tasks (the test cluster
    also holds every earlier example's), without the fields the analysis never reads."""
    snap_path = folder / "snapshot.json"
    diag = json.loads((folder / "diagnosis.json").read_text())
    job_id = diag["job_id"]
    snap = json.loads(snap_path.read_text())
    foreign = calls_into_other_jobs(job_id, snap["tasks"])  # calls into other jobs' actors stay
    called = {t.get("actor_id") for t in foreign}
    # and other jobs' actors the diagnosis names (a member of a process group outside the job)
    called |= {c.get("actor_id") for cause in diag["root_causes"] for c in cause["culprits"] if c.get("actor_id")}
    actors = [a for a in snap["actors"] if a.get("job_id") == job_id or a.get("actor_id") in called]
    tasks = [*(t for t in snap["tasks"] if t.get("job_id") == job_id), *foreign]
    # other jobs' actors and tasks that hold resources stay (a pending demand may wait for them)
    holders, holder_tasks = other_holders(Snapshot.from_dict(snap), job_id, {a.get("actor_id") for a in actors},
                                          {(t.get("task_id"), t.get("attempt_number")) for t in tasks})
    snap["actors"] = actors + holders
    snap["tasks"] = [{k: v for k, v in t.items() if k not in UNUSED_TASK_FIELDS} for t in tasks + holder_tasks]
    snap_path.write_text(json.dumps(snap))
    after = folder / "tasks_after.json"
    if after.exists():
        rows = json.loads(after.read_text())
        after.write_text(json.dumps([{k: v for k, v in t.items() if k not in UNUSED_TASK_FIELDS} for t in rows]))


def record(example: str, out: Path) -> None:
    dest = CASES / example
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for name in RECORDED_FILES:
        if (out / name).exists():
            shutil.copy(out / name, dest / name)
    trim_capture(dest)
    if (out / "logs").is_dir():
        shutil.copytree(out / "logs", dest / "logs")
    if (out / "flight_recorder").is_dir():  # PyTorch Flight Recorder dumps the probe read
        shutil.copytree(out / "flight_recorder", dest / "flight_recorder")


@pytest.mark.parametrize("example", localcluster.examples())
def test_example_is_diagnosed(ray_cluster: LocalCluster, example: str, tmp_path: Path) -> None:
    # GIVEN a real job from examples/ that has hung (or, for the healthy one, is running)
    expected = expected_of(example)
    job = submit_example(ray_cluster, example)
    try:
        # WHEN the responder runs the one-command diagnosis against the cluster
        out = tmp_path / "diag"
        proc = run_script(["scripts/diagnose_ray_hang.sh", ray_cluster.gcs, str(out), "--job-id", str(job.job_id)],
                          timeout_s=120, env=ray_cluster.env())
        # the job's code is where the diagnosis says, while the job still runs
        code = json.loads((out / "diagnosis.json").read_text()).get("job_code") or {}
        code_there = bool(code.get("working_dir")) and Path(code["working_dir"], f"{example}.py").is_file()
    finally:
        stop_job(ray_cluster, job)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"report: {out / 'report.md'}" in proc.stdout
    diag = json.loads((out / "diagnosis.json").read_text())
    jsonschema.validate(diag, SCHEMA)
    # the phase times add up to no more than the run (a slow phase is visible in the field)
    timings = diag["collection"]["timings"]
    assert {"address", "state", "stacks", "analysis"} <= set(timings), timings
    assert sum(timings.values()) <= diag["collection"]["seconds"] + 0.05, timings
    if os.environ.get("DEBUG_HANG_RECORD"):
        record(example, out)
    # THEN the verdict, the root-cause pattern and the culprits are the expected ones
    report = (out / "report.md").read_text()
    # (a healthy job may declare every verdict that is no false alarm: no-hang, or inconclusive with what was seen)
    assert diag["verdict"] in expected.get("verdicts", [expected["verdict"]]), f"{diag['summary']}\n{report}"
    for text in PROGRESS_SEEN.get(example, []):
        assert text in diag["summary"], f"{text!r} missing from the summary of {example}\n{report}"
    if expected["verdict"] != "hang":
        return
    top = diag["root_causes"][0]
    assert top["pattern"] == expected["pattern"], report
    for culprit in expected["culprits"]:
        assert culprit_matches(culprit, top["culprits"]), f"{culprit} not in {top['culprits']}\n{report}"
    assert diag["chains"], report
    # and it says what to read next, and where the job's code is
    assert top["next"]["pattern_doc"] == f"references/patterns.md#{expected['pattern']}"
    assert f"read: {top['next']['pattern_doc']}" in proc.stdout and "## Read next" in report
    assert top["next"]["case"] and (ROOT / top["next"]["case"]).is_file()
    assert code.get("entrypoint") == f"python {example}.py" and code_there, code
    assert diag["collection"]["seconds"] < 30, diag["collection"]
    for text in EXPLAINS.get(example, []):
        assert text in report, f"{text!r} missing from the report of {example}\n{report}"
    if "flight_recorder" in expected:
        # AND the Flight Recorder dumps, read on the ranks' node, name the same rank, group and collective
        assert_flight_recorder(expected["flight_recorder"], diag, report)


def assert_flight_recorder(expected: dict, diag: dict, report: str) -> None:
    fr = diag.get("flight_recorder")
    assert fr is not None, f"no flight_recorder section\n{report}"
    assert fr["culprit_ranks"] == expected["culprit_ranks"], fr
    first = fr["groups"][0]
    assert (first["desc"], first["pending_seq"], first["kind"]) == (
        expected["group_desc"], expected["pending_seq"], expected["kind"]), first
    assert "Flight Recorder: agrees with the stacks" in report, report


# Async examples run again with their actors on uvloop (Ray's default wherever ray[serve] is
# installed; the test cluster keeps asyncio's loop): an idle uvloop loop shows no Python frame of
# the loop, only Ray's thread name "AsyncIO Thread: <group>" over Thread.run.
UVLOOP_EXAMPLES = ("async_weight_store_wrong_instance", "async_slots_await_later_call")


@pytest.mark.parametrize("example", UVLOOP_EXAMPLES)
def test_async_example_is_diagnosed_under_uvloop(ray_cluster: LocalCluster, example: str, tmp_path: Path) -> None:
    try:
        import uvloop  # noqa: F401 - only whether Ray can run on it
    except ImportError:
        pytest.skip("uvloop is not installed here (it comes with ray[serve]): Ray runs asyncio's own loop")
    # GIVEN an async example whose actors run on uvloop (set for this job only)
    expected = expected_of(example)
    job = submit_example(ray_cluster, example, env_vars={"RAY_USE_UVLOOP": "1"})
    try:
        # WHEN the responder runs the one-command diagnosis
        out = tmp_path / "diag"
        proc = run_script(["scripts/diagnose_ray_hang.sh", ray_cluster.gcs, str(out), "--job-id", str(job.job_id)],
                          timeout_s=120, env=ray_cluster.env())
    finally:
        stop_job(ray_cluster, job)
    assert proc.returncode == 0, proc.stderr[-2000:]
    diag = json.loads((out / "diagnosis.json").read_text())
    # the culprit's event loop was uvloop's: its loop thread shows no frame of asyncio's loop
    stacks = json.loads((out / "stacks.json").read_text())
    loops = [t for p in stacks["processes"] if p.get("actor_class") == expected["culprits"][0]["class_name"]
             for t in p.get("threads") or [] if str(t.get("name") or "").startswith("AsyncIO Thread")]
    assert loops and not any("asyncio/base_events.py" in str(f.get("file")) for t in loops for f in t["frames"]), loops
    if os.environ.get("DEBUG_HANG_RECORD"):
        dest = ROOT / "tests" / "data" / "captures" / f"uvloop_{example}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for name in ("snapshot.json", "stacks.json", "tasks_after.json", "evidence.json", "diagnosis.json"):
            if (out / name).exists():
                shutil.copy(out / name, dest / name)
        trim_capture(dest)
        if (out / "logs").is_dir():
            shutil.copytree(out / "logs", dest / "logs")
    # THEN the same root cause as under asyncio's loop
    report = (out / "report.md").read_text()
    assert diag["verdict"] == "hang", f"{diag['summary']}\n{report}"
    top = diag["root_causes"][0]
    assert top["pattern"] == expected["pattern"], report
    for culprit in expected["culprits"]:
        assert culprit_matches(culprit, top["culprits"]), f"{culprit} not in {top['culprits']}\n{report}"
