"""Named-actor polls, processes stopped by a signal, Ray Data's own actor pools: real captures of
red-team round 5 (tests/data/captures/README.md), each with counterfactuals made by editing a copy
of the capture (one fact changed, the rest as recorded)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from debug_hang.analyse.diagnosis import Diagnosis
from debug_hang.pipeline import reanalyse
from debug_hang.report.markdown import render_markdown

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
CREATED_AFTER_WAIT = CAPTURES / "named_actor_created_after_wait"
CREATED_BY_BUSY_DRIVER = CAPTURES / "named_actor_created_by_busy_driver"
STOPPED = CAPTURES / "process_stopped_by_failed_snapshot"
DATA_POOL = CAPTURES / "data_pool_holds_upstream_cpus"


def _edited(folder: Path, tmp_path: Path, name: str, edit: Callable[[Any], None]) -> Path:
    """A copy of a recorded capture with one of its JSON files changed by `edit`."""
    out = tmp_path / folder.name
    shutil.copytree(folder, out)
    doc = json.loads((out / name).read_text())
    edit(doc)
    (out / name).write_text(json.dumps(doc))
    return out


def _names(diag: Diagnosis) -> list[str]:
    return [c.name.split(" (")[0] for cause in diag.causes for c in cause.culprits]


# ---------------------------------------------------------------- polls for a named actor


def test_a_poll_for_a_named_actor_its_only_creator_waits_on_is_a_cycle_naming_the_creator() -> None:
    # GIVEN two Trainers whose __init__ retries ray.get_actor("exp7-config"), and the driver in
    # ray.get on their ready() with the line creating that named actor just after
    diag = reanalyse(CREATED_AFTER_WAIT)
    top = diag.causes[0]
    # THEN the poll and the driver's wait are one cycle, and the driver (whose order is wrong) is
    # the only culprit; the Trainers are its victims
    assert diag.verdict == "hang" and top.pattern == "create-order-deadlock" and top.cycle
    assert [c.kind for c in top.culprits] == ["driver"]
    pollers = [n for n in diag.graph.nodes.values() if n.class_name == "Trainer"]
    assert len(pollers) == 2 and all(n.pattern == "named-actor-wait" and n.key in top.victims for n in pollers)
    assert all(c.pattern != "poll-never-satisfied" for c in diag.causes)
    edge = next(e for e in diag.graph.edges if e.why == "named-actor-wait")
    assert 'ConfigStore.options(name="exp7-config")' in edge.evidence and not edge.guessed
    assert "Create the named actor before" in render_markdown(diag)


def test_a_creator_whose_creation_line_is_not_shown_leaves_the_pollers_as_candidates(tmp_path: Path) -> None:
    # GIVEN the same capture, the driver's source shown without the line that creates the actor
    def drop_creation(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            for thread in proc.get("threads") or []:
                for frame in thread["frames"]:
                    if frame.get("context"):
                        frame["context"] = [line for line in frame["context"] if ".options(name=" not in line]

    diag = reanalyse(_edited(CREATED_AFTER_WAIT, tmp_path, "stacks.json", drop_creation))
    # THEN nobody is named at hang confidence: who should create the actor is not shown, and the
    # pollers are where to look, not culprits of a condition proven never to come
    assert diag.verdict == "inconclusive"
    assert all(c.pattern != "create-order-deadlock" and c.confidence < 0.8 for c in diag.causes)
    assert set(_names(diag)) == {"Trainer"}


def test_a_creation_of_another_name_is_no_creator_of_the_polled_actor(tmp_path: Path) -> None:
    # GIVEN the same capture, the driver's next line creating an actor of another name than the
    # one polled (`f"{run}-config"` looked up, "exp7-cache" created)
    def rename(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            for thread in proc.get("threads") or []:
                for frame in thread["frames"]:
                    frame["context"] = [line.replace('name="exp7-config"', 'name="exp7-cache"')
                                        for line in frame.get("context") or []] or frame.get("context")

    diag = reanalyse(_edited(CREATED_AFTER_WAIT, tmp_path, "stacks.json", rename))
    # THEN no cycle is closed through that line: the creator of the polled name is not shown
    assert diag.verdict == "inconclusive" and all(c.pattern != "create-order-deadlock" for c in diag.causes)


@pytest.mark.parametrize(("looked_up", "created", "same"), [
    ('f"{run}-config"', '"exp7-config"', True), ('f"{run}-config"', '"exp7-cache"', False),
    ('"store", namespace="ns"', '"store"', True), ('"store"', '"other"', False),
    ("name", '"anything"', True), ('"store"', 'f"{x}"', True),
])
def test_a_lookup_and_a_creation_name_the_same_actor_unless_both_literals_differ(looked_up: str, created: str, same: bool) -> None:
    from debug_hang.analyse.graph.lookups import _same_name

    assert _same_name(looked_up, created) is same


def test_a_poll_for_a_named_actor_nobody_of_the_job_could_create_stays_the_polls_own(tmp_path: Path) -> None:
    # GIVEN the same capture without the driver (no other party of the job runs code)
    def drop_driver(doc: dict[str, Any]) -> None:
        doc["processes"] = [p for p in doc["processes"] if p.get("role") != "driver"]

    diag = reanalyse(_edited(CREATED_AFTER_WAIT, tmp_path, "stacks.json", drop_driver))
    # THEN the rule draws nothing: the poll itself (a wrong name or namespace) stays the finding
    assert not any(e.why == "named-actor-wait" for e in diag.graph.edges)
    assert {c.pattern for c in diag.causes} <= {"poll-never-satisfied"}


def test_a_poll_for_a_named_actor_a_busy_driver_will_create_is_no_hang() -> None:
    # GIVEN the healthy twin: the Trainers poll, the driver computes (no wait on them) and creates
    # the actor when it is done
    diag = reanalyse(CREATED_BY_BUSY_DRIVER)
    # THEN the poll waits on the driver's work: no hang, no poll-never-satisfied, no driver culprit
    assert diag.verdict != "hang"
    assert all(c.pattern not in ("poll-never-satisfied", "create-order-deadlock") for c in diag.causes)
    edges = [e for e in diag.graph.edges if e.why == "named-actor-wait"]
    assert edges and all(e.guessed and diag.graph.nodes[e.dst].kind == "driver" for e in edges)


# ---------------------------------------------------------------- a process stopped by a signal


def test_a_process_stopped_by_a_signal_is_a_cause_of_its_own() -> None:
    # GIVEN a Trainer whose process a failed snapshot task left stopped (SIGSTOP, no SIGCONT):
    # py-spy could not attach, the probe read state T before and after the window
    diag = reanalyse(STOPPED)
    top = diag.causes[0]
    # THEN it is named, stopped, and the driver waiting on its fit() is its victim; nothing is
    # reported as "could not be inspected"
    assert diag.verdict == "hang" and top.pattern == "process-stopped"
    assert [c.class_name for c in top.culprits] == ["Trainer"]
    assert any(diag.graph.nodes[v].kind == "driver" for v in top.victims)
    assert not diag.uninspected
    assert any("state T" in text for text in top.evidence)
    assert "kill -CONT" in render_markdown(diag)


@pytest.mark.parametrize("states", [["S", "S"], ["T", "S"], ["t", "t"], None])
def test_a_process_not_stopped_for_the_whole_window_is_not_called_stopped(tmp_path: Path, states: list[str] | None) -> None:
    # GIVEN the same capture, the Trainer's state read otherwise (running, resumed meanwhile, a
    # tracer's stop, or not read at all, as in older captures)
    def restate(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            if info.get("run_state") is not None:
                info["run_state"] = states

    diag = reanalyse(_edited(STOPPED, tmp_path, "stacks.json", restate))
    # THEN it is no stopped process: without its stack, the verdict stays inconclusive
    assert all(c.pattern != "process-stopped" for c in diag.causes)
    assert diag.verdict == "inconclusive" and diag.uninspected


def test_the_probe_reads_its_own_state_as_running() -> None:
    import os

    from debug_hang.probe.pyspy import process_state

    assert process_state(os.getpid()) in ("R", "S")
    assert process_state(2**22 + 12345) is None


# ---------------------------------------------------------------- Ray Data's own actor pool


def test_ray_datas_pool_actors_holding_the_cpus_get_a_pool_size_fix_not_a_kill() -> None:
    # GIVEN map_batches' two UDF actors x 2 CPUs idle on a 4-CPU node, the ReadRange task pending
    diag = reanalyse(DATA_POOL)
    top = diag.causes[0]
    # THEN they are named as Ray Data's pool, with the fix in the pool's size, never ray.kill
    assert diag.verdict == "hang" and top.pattern == "data-pool-holds-resources"
    assert {c.class_name for c in top.culprits} == {"MapWorker(MapBatches(Enricher))"}
    report = render_markdown(diag)
    fix = next(line for line in report.splitlines() if line.startswith("- **Fix**"))
    assert "num_cpus" in fix and "ray.kill" not in fix
    node = top.culprits[0]
    assert any("operator MapBatches(Enricher)" in text for text in node.evidence)


def test_an_actor_no_ray_data_operator_lists_keeps_the_general_fix(tmp_path: Path) -> None:
    # GIVEN the same capture, the idle actors' class a user's own (no operator's pool names it)
    def users_class(doc: dict[str, Any]) -> None:
        for actor in doc["actors"]:
            if actor["class_name"].startswith("MapWorker("):
                actor["class_name"] = actor["repr_name"] = "Enricher"

    diag = reanalyse(_edited(DATA_POOL, tmp_path, "snapshot.json", users_class))
    # THEN they are idle actors like any other, with the general fix (kill them when done)
    assert diag.verdict == "hang" and diag.causes[0].pattern == "idle-actor-holds-resources"
    assert "ray.kill" in render_markdown(diag)


def test_a_pool_is_ray_datas_only_while_an_unfinished_dataset_of_its_job_lists_its_operator() -> None:
    from debug_hang.libraries import LibraryState

    raw = json.loads((DATA_POOL / "snapshot.json").read_text())["libraries"]
    state = LibraryState.of(raw)
    job = state.datasets[0].job_id
    found = state.pool_operator("MapWorker(MapBatches(Enricher))", job)
    assert found is not None and found[1].name == "MapBatches(Enricher)"
    assert state.pool_operator("MapWorker(MapBatches(Other))", job) is None
    assert state.pool_operator("MapBatches(Enricher)", job) is None
    assert state.pool_operator("MapWorker(MapBatches(Enricher))", "99000000") is None
