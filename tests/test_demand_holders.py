"""Every unmet demand has holders, and only holders that can never free it make a hang: on real
recorded captures (tests/data/cases/), each with one fact changed where the conclusion must change.

engine_restart_behind_profiler: an actor being restarted needs {accelerator: 2}, an idle actor
placed after its death holds 1 of the node's 2. trial_tasks_starve_own_bundle: tasks captured into
a placement group wait for its only bundle, held by the group's actor that waits for them.
retried_stage_leaks_group: a retried task's first attempt left a group behind. idle_evaluators_hold_cpus:
idle actors hold the CPUs a task needs (here made busy, or another job's).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.analyse.capacity import Capacity, claims, describe
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.rows import Rows
from debug_hang.snapshot import Snapshot, public_rows, usage_by_node

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"
RESTART = CASES / "engine_restart_behind_profiler"
BUNDLE = CASES / "trial_tasks_starve_own_bundle"
RETRIED = CASES / "retried_stage_leaks_group"
LOST_AT_ONCE = ROOT / "tests" / "data" / "captures" / "retried_stage_lost_at_once"
EVALUATORS = CASES / "idle_evaluators_hold_cpus"


def variant(case: Path, tmp_path: Path, edit: Any) -> Path:
    """A copy of a recorded capture with its snapshot rows edited by `edit(snapshot_dict)`; the
    second task reading (tasks_after.json) gets the same edit of its tasks."""
    out = tmp_path / case.name
    shutil.copytree(case, out)
    doc = json.loads((out / "snapshot.json").read_text())
    edit(doc)
    (out / "snapshot.json").write_text(json.dumps(doc))
    after = out / "tasks_after.json"
    if after.exists():
        again = {**doc, "tasks": json.loads(after.read_text())}
        edit(again)
        after.write_text(json.dumps(again["tasks"]))
    return out


def set_usage(doc: dict[str, Any], resource: str, used: float) -> None:
    """The load report (cluster-wide and per node) says `used` of `resource` is taken."""
    report = doc["cluster_status"]["loadMetricsReport"]
    for usage in [report["usage"], *report["usageByNode"].values()]:
        usage[resource] = [used, usage[resource][1]]


def test_a_restart_waits_for_the_idle_actor_that_took_its_resources() -> None:
    # GIVEN the real capture: Engine RESTARTING ({accelerator: 2}), KernelProfiler ALIVE and idle with 1
    doc = to_json(reanalyse(RESTART))
    top = doc["root_causes"][0]
    # THEN the profiler is the culprit, not the restarting engine (no crash loop: it died once)
    assert doc["verdict"] == "hang" and top["pattern"] == "idle-actor-holds-resources"
    assert [c["class_name"] for c in top["culprits"]] == ["KernelProfiler"]
    assert all(c["pattern"] != "crash-loop" for c in doc["root_causes"])
    # AND the chain goes driver → the engine being restarted → its demand → the profiler
    chain = [step["name"] for step in doc["chains"][0]]
    assert chain[1:] == ["Engine", "{accelerator: 2}", "KernelProfiler"]
    assert any("placed" in e and "after this request began waiting" in e for e in top["evidence"])


def test_a_restart_with_room_is_only_under_way(tmp_path: Path) -> None:
    # GIVEN the same capture, but the load report says both accelerators are free
    diag = reanalyse(variant(RESTART, tmp_path, lambda d: set_usage(d, "accelerator", 0.0)))
    # THEN nothing holds it up: it is being restarted, and nobody is blamed
    assert diag.verdict == "inconclusive" and "restarted" in diag.summary
    assert all(c.pattern != "idle-actor-holds-resources" for c in diag.causes)


def test_a_holder_running_a_call_may_free_it_so_no_hang(tmp_path: Path) -> None:
    # GIVEN the same capture, but the profiler is running a call (its profile RUNNING on it)
    def busy(doc: dict[str, Any]) -> None:
        call = next(t for t in doc["tasks"] if t["name"] == "KernelProfiler.profile")
        call.update(state="RUNNING", end_time_ms=None)
    diag = reanalyse(variant(RESTART, tmp_path, busy))
    # THEN the restart waits on a holder that may still finish: not a hang, and the holder is named
    assert diag.verdict != "hang"
    demand = next(n for n in diag.graph.nodes.values() if n.kind == "resource")
    assert any("KernelProfiler" in e and "runs KernelProfiler.profile" in e for e in demand.evidence)
    assert any("once holders that may still finish" in e for e in demand.evidence)


def test_tasks_captured_into_a_group_wait_for_its_bundle_and_its_holder() -> None:
    # GIVEN the real capture: preprocess tasks ask CPU_group_<id> (the trial's only bundle)
    diag = reanalyse(BUNDLE)
    doc = to_json(diag)
    top = doc["root_causes"][0]
    # THEN a starvation cycle through the group's bundle, the runner holding it: not an infeasible request
    assert doc["verdict"] == "hang" and top["pattern"] == "resource-starvation" and diag.causes[0].cycle
    assert [c["class_name"] for c in top["culprits"]] == ["TrialRunner"]
    assert all(c["pattern"] != "infeasible-resource" for c in doc["root_causes"])
    assert "_group_" not in doc["summary"]


def test_a_group_with_a_free_bundle_has_room(tmp_path: Path) -> None:
    # GIVEN the same capture, with a second bundle in the group, free
    def second_bundle(doc: dict[str, Any]) -> None:
        pg = doc["placement_groups"][0]
        pg["bundles"].append({**pg["bundles"][0], "bundle_id": {**pg["bundles"][0]["bundle_id"], "bundle_index": 1}})
        for usage in doc["cluster_status"]["loadMetricsReport"]["usageByNode"].values():
            for key in usage:
                if key.startswith("CPUGroup") and not key.startswith("CPUGroup0"):
                    usage[key] = [1.0, 2.0]  # the group's CPUs: 1 of 2 used
    diag = reanalyse(variant(BUNDLE, tmp_path, second_bundle))
    # THEN the tasks are merely not placed yet: no starvation, no hang
    assert diag.verdict != "hang"
    assert all(c.pattern != "resource-starvation" for c in diag.causes)


def test_a_retried_tasks_leftover_group_is_named_by_the_task() -> None:
    # GIVEN the real capture: attempt 0 of train_stage reserved a group and died; attempt 1 waits
    doc = to_json(reanalyse(RETRIED))
    top = doc["root_causes"][0]
    # THEN the leftover group is the culprit, known by the task whose failed attempt requested it
    assert doc["verdict"] == "hang" and top["pattern"] == "placement-group-leaked"
    assert [c["class_name"] for c in top["culprits"]] == ["train_stage"]
    text = "\n".join(top["evidence"])
    assert "attempt 0 of train_stage" in text and "FAILED (WORKER_DIED)" in text and "retried (attempt 1" in text


def test_a_leftover_group_of_an_attempt_lost_before_it_reported_running_is_named_by_the_task() -> None:
    # GIVEN a real capture (tests/data/captures/retried_stage_lost_at_once): attempt 0 of
    # train_stage reserved its group and its worker exited at once, before its RUNNING event was
    # flushed, so that FAILED row has no start time, only its creation time before the group's
    doc = to_json(reanalyse(LOST_AT_ONCE))
    top = doc["root_causes"][0]
    # THEN the leftover group is still known by that attempt, not an anonymous group id
    assert doc["verdict"] == "hang" and top["pattern"] == "placement-group-leaked"
    assert [c["class_name"] for c in top["culprits"]] == ["train_stage"]
    assert any("requested while attempt 0 of train_stage" in e for e in top["evidence"]), top["evidence"]


def test_a_group_whose_actors_live_is_not_leaked(tmp_path: Path) -> None:
    # GIVEN the same capture, but the leftover group's ShardLoaders ALIVE (the group is in use)
    def revive(doc: dict[str, Any]) -> None:
        for actor in doc["actors"]:
            if actor.get("placement_group_id"):
                actor["state"] = "ALIVE"
    diag = reanalyse(variant(RETRIED, tmp_path, revive))
    # THEN its holders may still finish: no leak, no hang
    assert all(c.pattern != "placement-group-leaked" for c in diag.causes)
    assert diag.verdict != "hang"


def test_idle_holders_running_calls_may_free_them(tmp_path: Path) -> None:
    # GIVEN the evaluators' capture, but each Evaluator running an evaluate call
    def busy(doc: dict[str, Any]) -> None:
        for ping in [t for t in doc["tasks"] if t["name"] == "Evaluator.ping"]:
            ping.update(state="RUNNING", name="Evaluator.evaluate", end_time_ms=None)
    diag = reanalyse(variant(EVALUATORS, tmp_path, busy))
    # THEN the pending task waits for holders that may finish: not a hang, no idle holder blamed
    assert diag.verdict != "hang"
    assert all(c.pattern not in ("idle-actor-holds-resources", "resource-starvation") or not c.cycle
               for c in diag.causes)
    assert all(c.pattern != "idle-actor-holds-resources" for c in diag.causes)


def test_busy_holders_of_another_job_are_named_not_blamed(tmp_path: Path) -> None:
    # GIVEN the evaluators' capture, the Evaluators belonging to another RUNNING job that calls them
    def foreign(doc: dict[str, Any]) -> None:
        if not any(j["job_id"] == "7f000000" for j in doc["jobs"]):
            doc["jobs"].append({"job_id": "7f000000", "status": "RUNNING", "entrypoint": "python other.py"})
        for actor in doc["actors"]:
            actor["job_id"] = "7f000000"
        for task in doc["tasks"]:
            if task["name"].startswith("Evaluator"):
                task["job_id"] = "7f000000"
                if task["name"] == "Evaluator.ping":
                    task.update(state="RUNNING", end_time_ms=None, parent_task_id="f" * 40 + "7f000000")
    folder = variant(EVALUATORS, tmp_path, foreign)
    stacks = json.loads((folder / "stacks.json").read_text())  # another job's processes are not dumped
    stacks["processes"] = [p for p in stacks["processes"] if p.get("role") == "driver"]
    (folder / "stacks.json").write_text(json.dumps(stacks))
    diag = reanalyse(folder)
    # THEN they are named with what they do, and the verdict waits: they may free the CPUs
    assert diag.verdict == "inconclusive"
    demand = next(n for n in diag.graph.nodes.values() if n.kind == "resource")
    assert any("Evaluator" in e and "job 7f000000, not dumped" in e for e in demand.evidence)


def test_a_normal_task_in_ray_get_holds_no_cpu() -> None:
    # GIVEN the starvation capture's rows: the running loaders are actors; make one a normal task
    snap = Snapshot.from_dict(json.loads((CASES / "starvation" / "snapshot.json").read_text()))
    rows = Rows.of(snap)
    running = [t for t in rows.tasks if t.state == "RUNNING" and t.required_resources]
    # WHEN the claims are read with one of them lending its CPUs out (blocked in ray.get)
    lent = {running[0].task_id} if running else set()
    held = claims(rows.actors, rows.tasks, rows.placement_groups, lent)
    # THEN that task claims no CPU; the actors keep theirs
    assert all("CPU" not in c.held for c in held if c.id in lent)
    assert sum(c.held.get("CPU", 0.0) for c in held if c.kind == "actor") == 4.0


def test_room_is_per_node_not_the_clusters_sum() -> None:
    # GIVEN the evaluators' load report split over two nodes with one free CPU each
    snap = Snapshot.from_dict(json.loads((EVALUATORS / "snapshot.json").read_text()))
    (node, usage), = usage_by_node(snap).items()
    halves = {node: {**usage, "CPU": (1.0, 2.0)}, "b" * 56: {**usage, "CPU": (1.0, 2.0)}}
    cap = Capacity.of([], halves, {"CPU": 2.0}, [])
    # THEN two free CPUs in all, but no node has room for {CPU: 2}: it is starved, not merely unplaced
    assert cap.feasible({"CPU": 2.0}) and not cap.placeable_now({"CPU": 2.0})
    assert cap.placeable_now({"CPU": 1.0})


def test_group_resources_read_as_people_write_them() -> None:
    gid = "431b0952bc3c17b9ab38570b3ea502000000"
    assert describe({f"CPU_group_{gid}": 1.0, f"bundle_group_{gid}": 0.001}) == "{CPU: 1} of placement group 431b0952bc3c"
    assert describe({f"CPU_group_0_{gid}": 1.0}) == "{CPU: 1} of placement group 431b0952bc3c, bundle 0"


def test_saved_folders_keep_other_jobs_holders() -> None:
    # GIVEN the evaluators' snapshot, their actors filed under another job
    snap = Snapshot.from_dict(json.loads((EVALUATORS / "snapshot.json").read_text()))
    for actor in snap.actors:
        actor["job_id"] = "7f000000"
        actor["runtime_env"] = {"env_vars": {"TOKEN": "x"}}
    # WHEN the written rows are made for job 02000000
    kept = public_rows(snap, "02000000").actors
    # THEN the other job's holders stay, with who they are and what they hold only
    assert len(kept) == 3 and all(a["required_resources"] == {"CPU": 1.0} for a in kept)
    assert all("runtime_env" not in a for a in kept)
