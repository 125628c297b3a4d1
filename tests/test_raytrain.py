"""Ray Train (V2) support, on the real capture of examples/ray_train_early_stop.py.

The capture holds what a TorchTrainer run really looks like to the diagnosis: the controller, its
helper actors (PreemptionWatcher, PlacementGroupCleaner, SynchronizationActor, Ray Data's
autoscaling coordinator), two RayTrainWorker ranks, and the controller's status polls.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from debug_hang.analyse.analysis import _match_with_cpu, detect_progress
from debug_hang.analyse.patterns import match_process, match_thread
from debug_hang.collect.raytrain import parse_worker_ranks
from debug_hang.model import Collection, stacks_from_dict
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.rows import tasks_of
from debug_hang.snapshot import POLLING_TASKS, Snapshot

pytestmark = pytest.mark.unit

CASE = ROOT / "tests" / "data" / "cases" / "ray_train_early_stop"


def _processes() -> list:
    return stacks_from_dict(json.loads((CASE / "stacks.json").read_text()))


def test_worker_ranks_come_from_the_controller_log_and_match_the_recorded_ranks() -> None:
    # GIVEN the TrainController's own .err log, as the diagnosis fetched it
    log = next((CASE / "logs").glob("TrainController-*.err")).read_text()
    # WHEN its worker-group lines are parsed
    ranks = parse_worker_ranks(log)
    # THEN every RayTrainWorker process of the capture has the rank the log gives its pid
    workers = {p.pid: p.rank for p in _processes() if p.actor_class == "RayTrainWorker"}
    assert len(workers) == 2
    assert {pid: rank for (_ip, pid), rank in ranks.items()} == workers
    assert sorted(workers.values()) == [0, 1]


def test_parse_worker_ranks_keeps_the_latest_group_after_a_restart() -> None:
    # GIVEN a controller log where the worker group was started twice (a restart after a failure)
    log = next((CASE / "logs").glob("TrainController-*.err")).read_text()
    lines = [ln for ln in log.splitlines() if "world_rank=" in ln]
    restarted = log + "\n" + "\n".join(ln.replace("world_rank=0", "world_rank=X").replace("world_rank=1", "world_rank=0")
                                       .replace("world_rank=X", "world_rank=1") for ln in lines)
    # WHEN it is parsed THEN the later assignment wins
    first, later = parse_worker_ranks(log), parse_worker_ranks(restarted)
    assert {k: 1 - v for k, v in first.items()} == later


def test_ray_library_threads_are_benign_but_job_code_is_not() -> None:
    # GIVEN the capture's Ray Train helper actors (only Ray library frames on their stacks)
    procs = {p.actor_class: p for p in _processes() if p.sample == 0}
    for cls in ("PreemptionWatcher", "PlacementGroupCleaner", "_AutoscalingCoordinatorActor"):
        # WHEN each process is matched THEN it is idle, not a lock wait or a polling loop
        verdict = match_process(procs[cls])
        assert verdict.verdict == "idle", (cls, [(t.name, m.pattern) for t, m in verdict.threads])
    # AND the rank-0 training thread (job code under Ray Train's thread runner) is a DDP wait
    rank0 = next(p for p in _processes() if p.actor_class == "RayTrainWorker" and p.rank == 0)
    training = next(t for t in rank0.threads if (t.name or "").startswith("TrainingThread"))
    assert match_thread(training).pattern == "ddp-wait"


def test_backward_with_real_cpu_use_is_computing_not_waiting() -> None:
    # GIVEN rank 0 waiting in loss.backward(), with the CPU use the capture measured (~0%)
    rank0 = next(p for p in _processes() if p.actor_class == "RayTrainWorker" and p.rank == 0)
    measured = json.loads((CASE / "stacks.json").read_text())["meta"]["info"]
    coll = Collection(processes=[rank0], info=Collection.info_from_json(measured))
    assert _match_with_cpu(rank0, coll).pattern == "ddp-wait"
    # WHEN the same stack comes with 95% CPU (a backward pass that computes)
    busy = Collection(processes=[rank0], info={(rank0.node_id, rank0.pid or -1): {"cpu_percent": 95.0}})
    # THEN it is not read as a wait
    assert _match_with_cpu(rank0, busy).pattern != "ddp-wait"


def test_controller_status_polls_are_not_progress() -> None:
    # GIVEN the two task listings of the capture, the first without its newest status poll
    snap = Snapshot.from_dict(json.loads((CASE / "snapshot.json").read_text()))
    after = json.loads((CASE / "tasks_after.json").read_text())
    polls = sorted((t for t in after if t.get("name") in POLLING_TASKS and t.get("state") == "FINISHED"),
                   key=lambda t: t.get("end_time_ms") or 0)
    assert len(polls) >= 4  # the controller polls each worker about once a second
    newest = polls[-1]
    before = [t for t in snap.tasks if t.get("task_id") != newest["task_id"]]
    before.append(dict(newest, state="RUNNING"))
    # WHEN progress is judged THEN a finished poll is not progress, while any other finished call is
    assert detect_progress(tasks_of(before), tasks_of(after), since_ms=0) == []
    renamed = [dict(t, name="RayTrainWorker.train_step") if t["task_id"] == newest["task_id"] else t for t in after]
    assert detect_progress(tasks_of(before), tasks_of(renamed), since_ms=0) == [
        "RayTrainWorker.train_step finished during the diagnosis"]


def test_chain_runs_driver_to_controller_to_ranks() -> None:
    # GIVEN the capture WHEN it is re-analysed
    diag = reanalyse(CASE)
    chain = next(iter(to_json(diag)["chains"]))
    # THEN the chain goes driver → TrainController → rank 0 (in backward) → rank 1 (skipped)
    assert [n["kind"] for n in chain][0] == "driver"
    names = [n["name"] for n in chain]
    assert names[1] == "TrainController" and names[-1] == "RayTrainWorker"
    assert chain[-2]["pattern"] == "ddp-wait" and chain[-1]["pattern"] == "collective-skipped"
    # AND the evidence quotes the rank's own last words
    assert any("early stop at epoch" in h for v in diag.evidence.per_node.values() for h in v.highlights)


def test_polling_tasks_leave_the_task_history() -> None:
    from debug_hang.collect.evidence import task_history

    diag = reanalyse(CASE)
    culprit = diag.causes[0].culprits[0]
    history = task_history(culprit, json.loads((CASE / "tasks_after.json").read_text()))
    assert history and not any("poll_status" in line for line in history)
    assert any("run_train_fn FINISHED" in line for line in history)



BARRIER_CASE = ROOT / "tests" / "data" / "cases" / "ray_train_report_rank0"


def test_report_on_rank_zero_only_is_a_cycle_through_the_barrier() -> None:
    # GIVEN the real capture of `if rank == 0: ray.train.report(...)` WHEN it is re-analysed
    diag = reanalyse(BARRIER_CASE)
    nodes = diag.graph.nodes
    # THEN the SynchronizationActor holds a barrier rank 0 joined and rank 1 did not
    sync = next(n for n in nodes.values() if n.class_name == "SynchronizationActor")
    assert sync.pattern == "train-barrier-wait"
    assert any("not called by RayTrainWorker[rank 1]" in e for e in sync.evidence), sync.evidence
    # AND the cycle rank 0 → barrier → rank 1 → rank 0 names rank 1, the rank that skipped it
    top = diag.causes[0]
    assert top.pattern == "train-barrier-skipped" and top.cycle
    assert {nodes[k].class_name for k in top.cycle} == {"RayTrainWorker", "SynchronizationActor"}
    # (rank 1 never calls report; the rank inside the barrier is named too, after it, since a
    # rank that ran fewer steps gives the same picture)
    assert [(c.class_name, c.rank) for c in top.culprits] == [("RayTrainWorker", 1), ("RayTrainWorker", 0)]


def test_a_training_thread_waits_on_calls_whose_parent_is_any_task_of_its_actor() -> None:
    # GIVEN the capture: the barrier call rank 0 waits on was submitted from Ray Train's training
    # thread, and Ray recorded as its parent a task the actor's main thread had run (a status poll)
    snap = Snapshot.from_dict(json.loads((BARRIER_CASE / "snapshot.json").read_text()))
    by_id = {t["task_id"]: t for t in snap.tasks}
    call = next(t for t in snap.tasks if t["name"] == "SynchronizationActor.broadcast_from_rank_zero")
    parent = by_id[call["parent_task_id"]]
    assert parent["state"] == "FINISHED" and parent["name"] != "RayTrainWorker.run_train_fn"
    # WHEN the graph is built THEN rank 0 still waits on the SynchronizationActor
    diag = reanalyse(BARRIER_CASE)
    rank0 = next(k for k, n in diag.graph.nodes.items() if n.class_name == "RayTrainWorker" and n.rank == 0)
    assert [diag.graph.nodes[e.dst].class_name for e in diag.graph.out(rank0)] == ["SynchronizationActor"]


def test_ray_data_autoscaling_coordinator_calls_are_not_progress() -> None:
    """Seen live: `_AutoscalingCoordinatorActor.request_resources`, which Ray Train V2 calls on a
    timer, finished during a diagnosis of this hang and made it `no-hang`. From the capture's rows."""
    snap = Snapshot.from_dict(json.loads((CASE / "snapshot.json").read_text()))
    after = json.loads((CASE / "tasks_after.json").read_text())
    rows = [t for t in after if str(t.get("name")).startswith("_AutoscalingCoordinatorActor.")
            and t.get("state") == "FINISHED"]
    assert rows, "the capture holds the coordinator's calls"
    newest = max(rows, key=lambda t: t.get("end_time_ms") or 0)
    before = [t for t in snap.tasks if t.get("task_id") != newest["task_id"]] + [dict(newest, state="RUNNING")]
    assert detect_progress(tasks_of(before), tasks_of(after), since_ms=0) == []
