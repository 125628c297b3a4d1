"""Who holds what a pending demand needs, on real recorded captures (tests/data/cases/).

sweep_leaked_placement_group: trial 0's group is CREATED with its actors killed; trial 1's group
is PENDING (NO_RESOURCES). idle_evaluators_hold_cpus: three idle num_cpus=1 actors hold the CPUs
a num_cpus=2 task waits for. Variants are made from those real rows (an actor revived, a group
never used and young) to show that the mechanism, not a name, decides.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.analyse.holders import idle_actors, leaked_placement_groups, plain_resources, status_reserved_line
from debug_hang.analyse.patterns import catalog
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.rows import ActorRow, JobRow, PlacementGroupRow, Rows, TaskRow
from debug_hang.snapshot import Snapshot, resource_usage

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"
SWEEP = CASES / "sweep_leaked_placement_group"
EVALUATORS = CASES / "idle_evaluators_hold_cpus"


def snapshot(case: Path) -> Snapshot:
    return Snapshot.from_dict(json.loads((case / "snapshot.json").read_text()))


def typed(snap: Snapshot) -> tuple[list[PlacementGroupRow], list[ActorRow], list[TaskRow]]:
    rows = Rows.of(snap)
    return rows.placement_groups, rows.actors, rows.tasks


def jobs_of(snap: Snapshot) -> dict[str, JobRow]:
    return {str(j.job_id): j for j in Rows.of(snap).jobs}


def variant(case: Path, tmp_path: Path, edit: Any) -> Path:
    """A copy of a recorded capture with its snapshot rows edited by `edit(snapshot_dict)`."""
    out = tmp_path / case.name
    shutil.copytree(case, out)
    doc = json.loads((out / "snapshot.json").read_text())
    edit(doc)
    (out / "snapshot.json").write_text(json.dumps(doc))
    return out


def test_leaked_group_is_the_created_one_with_only_dead_actors() -> None:
    # GIVEN the sweep's real State API rows
    snap = snapshot(SWEEP)
    # WHEN the groups nothing uses are looked for
    found = leaked_placement_groups(*typed(snap), jobs_of(snap), snap.taken_at,
                                    resource_usage(snap))
    # THEN only trial 0's group is one: CREATED, 3 CPUs, its actors DEAD by ray.kill; not the PENDING one
    assert [h.class_name for h in found] == ["trial-0"]
    holder = found[0]
    assert holder.held == {"CPU": 3.0} and holder.used and holder.age_s is not None and holder.age_s > 0
    assert any("DEAD (RAY_KILL)" in e for e in holder.evidence)
    assert any("0 CPU used of 3 reserved" in e for e in holder.evidence)
    assert holder.job_id in jobs_of(snap)


def test_sweep_names_the_holder_not_the_waiting_group() -> None:
    # GIVEN the recorded sweep whose trial 1 waits in pg.ready()
    diag = reanalyse(SWEEP)
    doc = to_json(diag)
    # THEN the culprit is trial 0's group, with its creator, age, ray status's disguise and advice
    top = doc["root_causes"][0]
    assert doc["verdict"] == "hang" and top["pattern"] == "placement-group-leaked"
    assert [c["name"] for c in top["culprits"]] == ["placement group trial-0"]
    text = "\n".join(top["evidence"])
    assert "CREATED" in text and "by job" in text and "s ago" in text
    assert "0.0 used of 3.0 reserved in placement groups" in text
    assert "remove_placement_group" in text and "advice only" in text
    # AND the chain runs driver → trial-1 (pending) → trial-0
    chain = [step["name"] for step in doc["chains"][0]]
    assert chain[-2:] == ["placement group trial-1", "placement group trial-0"]


def test_a_live_actor_in_the_group_means_it_is_not_leaked(tmp_path: Path) -> None:
    # GIVEN the same capture, but one of trial 0's actors ALIVE (the group is in use)
    def revive(doc: dict[str, Any]) -> None:
        member = next(a for a in doc["actors"] if a.get("placement_group_id") and a.get("state") == "DEAD")
        member["state"] = "ALIVE"
    diag = reanalyse(variant(SWEEP, tmp_path, revive))
    # THEN no leaked group is named (the pending group is back to being the end of the chain)
    assert all(c.pattern != "placement-group-leaked" for c in diag.causes)


@pytest.mark.parametrize(("age_factor", "blamed"), [(0.5, False), (2.0, True)])
def test_a_group_never_used_is_blamed_only_once_old_enough(tmp_path: Path, age_factor: float, blamed: bool) -> None:
    # GIVEN trial 0's group with no actor or task ever placed in it, created some time before the reading
    limit = catalog()["placement-group-leaked"].thresholds["min_age_never_used_s"]

    def never_used(doc: dict[str, Any]) -> None:
        pg = next(p for p in doc["placement_groups"] if p["state"] == "CREATED")
        doc["actors"] = [a for a in doc["actors"] if a.get("placement_group_id") != pg["placement_group_id"]]
        doc["tasks"] = [t for t in doc["tasks"] if t.get("placement_group_id") != pg["placement_group_id"]]
        pg["stats"]["creation_request_received_ns"] = str(int((doc["taken_at"] - limit * age_factor) * 1e9))
        gone.add(pg["placement_group_id"])
    gone: set[str] = set()
    folder = variant(SWEEP, tmp_path, never_used)
    after = json.loads((folder / "tasks_after.json").read_text())  # the second reading agrees
    (folder / "tasks_after.json").write_text(json.dumps([t for t in after if t.get("placement_group_id") not in gone]))
    diag = reanalyse(folder)
    # THEN a young one may be between pg.ready() and its actors' creation (the catalog's threshold);
    # an old one is a leak ("no actor or task was ever placed in it")
    named = [c for c in diag.causes if c.pattern == "placement-group-leaked"]
    assert bool(named) is blamed
    if blamed:
        assert any("was ever placed in it" in e for e in named[0].evidence)


def test_idle_evaluators_are_the_culprits_of_the_pending_task() -> None:
    # GIVEN three idle num_cpus=1 actors and a num_cpus=2 task pending
    diag = reanalyse(EVALUATORS)
    top = diag.causes[0]
    # THEN the three idle actors are named, each holding a CPU, not the resource request
    assert top.pattern == "idle-actor-holds-resources"
    assert sorted(c.class_name or "" for c in top.culprits) == ["Evaluator"] * 3
    assert all(c.kind != "resource" for c in top.culprits)
    assert any("no task running or queued on it" in e for e in top.evidence)


def test_blocked_holders_are_not_idle_holders() -> None:
    # GIVEN the starvation capture: loaders hold every CPU while RUNNING ray.get
    snap = snapshot(CASES / "starvation")
    # THEN none of them is an idle holder, and the finding stays resource-starvation
    assert idle_actors(*typed(snap)[1:], jobs_of(snap), snap.taken_at) == []
    assert reanalyse(CASES / "starvation").causes[0].pattern == "resource-starvation"


def test_resources_inside_a_group_are_not_the_clusters() -> None:
    # GIVEN a real actor row placed in a group (its resources are CPU_group_* names)
    snap = snapshot(SWEEP)
    member = next(a for a in snap.actors if a.get("placement_group_id"))
    # THEN it takes nothing from the cluster outside the group's reservation
    assert plain_resources(member["required_resources"]) == {}


def test_ray_status_reserved_line_is_found() -> None:
    line = status_reserved_line(snapshot(SWEEP).cluster_status_text)
    assert line is not None and "reserved in placement groups" in line
    assert status_reserved_line(snapshot(CASES / "starvation").cluster_status_text) is None


def test_actors_created_into_a_pending_group_wait_for_the_group_and_its_holder() -> None:
    # GIVEN a real capture: trial 1's actors created straight into its PENDING group (no
    # pg.ready()), their resources Ray's CPU_group_<i>_<id> names, which no node has yet
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "actors_in_pending_pg")
    top = diag.causes[0]
    # THEN they wait for the group (not an "infeasible" request), and the group for trial 0's
    assert top.pattern == "placement-group-leaked"
    assert [c.name for c in top.culprits] == ["placement group trial-0"]
    assert all(c.pattern != "infeasible-resource" for c in diag.causes)
    assert "_group_" not in diag.summary


def test_holders_of_an_ended_job_are_left_to_ray_unless_detached(tmp_path: Path) -> None:
    # GIVEN the sweep's rows, with the creator job marked STOPPED (Ray removes its groups itself)
    snap = snapshot(SWEEP)
    for job in snap.jobs:
        job["status"] = "STOPPED"
    # THEN its non-detached group is no leak; the same group detached is one
    assert leaked_placement_groups(*typed(snap), jobs_of(snap), snap.taken_at) == []
    for pg in snap.placement_groups:
        pg["is_detached"] = True
    assert [h.class_name for h in leaked_placement_groups(*typed(snap), jobs_of(snap), snap.taken_at)] == ["trial-0"]


def test_a_request_with_free_capacity_is_not_held_up_by_idle_actors(tmp_path: Path) -> None:
    # GIVEN the evaluators' capture, but the load report saying 3 of 4 CPUs are free
    def free(doc: dict[str, Any]) -> None:
        report = doc["cluster_status"]["loadMetricsReport"]
        report["usage"]["CPU"] = [1.0, 4.0]
        for usage in report["usageByNode"].values():
            usage["CPU"] = [1.0, 4.0]
    diag = reanalyse(variant(EVALUATORS, tmp_path, free))
    # THEN the task is merely not placed yet: the idle actors are not blamed
    assert all(c.pattern != "idle-actor-holds-resources" for c in diag.causes)
    assert diag.verdict != "hang"


def test_an_actor_busy_only_with_calls_of_an_ended_job_is_not_in_use() -> None:
    # GIVEN the evaluators' rows, one Evaluator detached and running a call made by an ended job
    # (its recorded ping re-pointed: RUNNING, parent in job 7f000000, which is STOPPED)
    snap = snapshot(EVALUATORS)
    old = {"job_id": "7f000000", "status": "STOPPED", "entrypoint": "python old_eval.py"}
    jobs = {**jobs_of(snap), "7f000000": JobRow.of(old)}
    ping = next(t for t in snap.tasks if t.get("name") == "Evaluator.ping")
    ping.update(state="RUNNING", parent_task_id="f" * 40 + "7f000000")
    actor = next(a for a in snap.actors if a["actor_id"] == ping["actor_id"])
    actor["is_detached"] = True
    # WHEN idle holders are looked for
    found = {h.id: h for h in idle_actors(*typed(snap)[1:], jobs, snap.taken_at)}
    # THEN it counts as unused (nobody waits for that call), and says why
    assert actor["actor_id"] in found
    assert any("7f000000, which has ended (STOPPED)" in e for e in found[actor["actor_id"]].evidence)
    # AND a call from a live job keeps it in use
    jobs["7f000000"] = JobRow.of({**old, "status": "RUNNING"})
    assert actor["actor_id"] not in {h.id for h in idle_actors(*typed(snap)[1:], jobs, snap.taken_at)}


LABELS = ROOT / "tests" / "data" / "captures" / "label_selector_unmatched"


def test_an_actor_whose_label_selector_no_node_has_is_infeasible() -> None:
    # GIVEN a real capture: ShardCache pending with label_selector {disk-type: nvme}, the only node
    # labelled ray.io/node-id alone, its CPUs free
    diag = reanalyse(LABELS)
    top = diag.causes[0]
    # THEN the request is infeasible (not "still starting"), the selector named
    assert diag.verdict == "hang"
    assert top.pattern == "infeasible-resource"
    assert "disk-type=nvme" in top.culprits[0].name
    assert [c.class_name for c in top.culprits][1:] == ["ShardCache"]


def test_a_label_selector_a_node_satisfies_is_only_pending(tmp_path: Path) -> None:
    # GIVEN the same capture with the node labelled disk-type=nvme
    def label(doc: dict[str, Any]) -> None:
        for node in doc["nodes"]:
            node["labels"]["disk-type"] = "nvme"
    diag = reanalyse(variant(LABELS, tmp_path, label))
    # THEN nothing is infeasible: the scheduler has not placed it yet
    assert all(c.pattern != "infeasible-resource" for c in diag.causes)
    assert diag.verdict == "inconclusive"


def test_label_selector_operators() -> None:
    from debug_hang.analyse.graph.resources import selector_matches
    node = {"disk-type": "nvme", "zone": "a"}
    assert selector_matches({"disk-type": "nvme"}, node)
    assert not selector_matches({"disk-type": "ssd"}, node)
    assert selector_matches({"disk-type": "!ssd"}, node) and not selector_matches({"zone": "!a"}, node)
    assert selector_matches({"zone": "in(a,b)"}, node) and not selector_matches({"zone": "in(b, c)"}, node)
    assert selector_matches({"zone": "!in(b,c)"}, node) and not selector_matches({"zone": "!in(a)"}, node)
    assert selector_matches({"gpu": "!in(a)"}, node) and not selector_matches({"gpu": "x"}, node)

