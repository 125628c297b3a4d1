"""Ray's libraries as part of the graph, on recorded real captures (tests/data/cases/): a Serve
handle's wait followed to the replica that holds it, a Ray Data consumer's wait to the operator
whose output stopped, and the libraries' own calls and progress read for what they are."""

from __future__ import annotations

import copy
import json
import time

import pytest
from conftest import ROOT

from debug_hang.analyse.analysis import analyse, detect_progress, graph_inputs
from debug_hang.analyse.graph import build_graph
from debug_hang.analyse.library_progress import library_method, library_work
from debug_hang.collect.libraries import data_reading, serve_reading
from debug_hang.collect.state import DashboardClient
from debug_hang.libraries import LibraryState
from debug_hang.pipeline import Capture, load_capture
from debug_hang.probe.libraries import parse_samples
from debug_hang.rows import Rows, actor_of_task, tasks_of

pytestmark = pytest.mark.unit

CASES = ROOT / "tests" / "data" / "cases"
SERVE_METRICS = ROOT / "tests" / "data" / "library" / "serve_metrics" / "node_metrics.txt"


def capture(name: str) -> Capture:
    return load_capture(CASES / name)


def diagnose(cap: Capture):  # type: ignore[no-untyped-def]
    return analyse(cap.job, cap.snapshot, cap.collection, cap.tasks_after, "", "", [], [], time.monotonic())


def without_libraries(cap: Capture) -> Capture:
    """The same capture as a collection that read none of the libraries' state would have it."""
    cap = copy.deepcopy(cap)
    cap.snapshot.libraries = {}
    cap.collection.library_metrics = {}
    return cap


# ---------------------------------------------------------------- Ray Serve

def test_serve_handle_waits_lead_to_the_replica_whose_requests_await() -> None:
    # GIVEN rollout actors waiting in DeploymentResponse.result on a replica whose batcher holds
    # the asyncio.Lock every request needs (examples/serve_batcher_holds_lock.py)
    cap = capture("serve_batcher_holds_lock")
    g = build_graph(graph_inputs(cap.job, cap.snapshot, cap.collection))
    replica = next(n for n in g.nodes.values() if n.class_name == "ServeReplica:rewards:RewardModel")
    callers = [n for n in g.nodes.values() if n.pattern == "serve-response-wait"]
    # THEN every caller's wait is an edge to the deployment's replica (no task row links them)
    assert callers and all(any(e.dst == replica.key and e.why == "serve-response-wait" for e in g.out(c.key)) for c in callers)
    assert all(c.class_name == "RolloutWorker" for c in callers)
    # AND the replica is the culprit: requests in flight, none finished, its coroutines awaiting
    assert replica.pattern == "serve-replica-stuck" and not g.out(replica.key)
    text = " ".join(replica.evidence)
    assert "0 finished in the window" in text and "request log" in text and "await" in text and "py-spy" in text
    diag = diagnose(cap)
    assert diag.verdict == "hang" and diag.causes[0].culprits[0].key == replica.key


def test_without_the_serve_state_the_waiting_callers_are_not_named_culprits() -> None:
    # GIVEN the same hang, read without the Serve controller's state and the node's Serve metrics
    diag = diagnose(without_libraries(capture("serve_batcher_holds_lock")))
    # THEN the callers, victims by their own wait, are no culprits: the verdict says what is missing
    assert diag.verdict == "inconclusive", diag.summary
    assert "could not be followed" in diag.summary


def test_a_replica_finishing_requests_is_progress_though_every_stack_waits() -> None:
    # GIVEN clients in DeploymentResponse.result on an async replica whose stack shows an idle loop
    cap = capture("healthy_serve_under_load")
    diag = diagnose(cap)
    # THEN its request log's finished requests in the window are the job's progress
    assert diag.verdict == "no-hang", diag.summary
    assert "Serve request(s) of embedder/Embedder in the window" in diag.summary


def test_serve_metrics_name_each_callers_requests_in_flight() -> None:
    # GIVEN a node's real Serve metrics while the rollout actors waited on the RewardModel replica
    samples = parse_samples(SERVE_METRICS.read_text().splitlines())
    ongoing = [s for s in samples if s["name"] == "ray_serve_num_ongoing_requests_at_replicas"]
    # THEN each router's series names its calling actor (the driver as DRIVER) and the deployment
    assert {s["labels"]["deployment"] for s in ongoing} == {"RewardModel"}
    callers = {s["labels"]["actor_id"]: s["value"] for s in ongoing}
    assert callers.pop("DRIVER") == 0.0 and len(callers) == 4 and set(callers.values()) == {1.0}
    # AND the replica's own gauge, by its worker id, counts the four requests it holds
    held = [s for s in samples if s["name"] == "ray_serve_replica_processing_queries"]
    assert [s["value"] for s in held] == [4.0] and len(held[0]["labels"]["WorkerId"]) == 56
    # AND nothing but the kept labels leaves the node (no session name, no node address)
    assert all(set(s["labels"]) <= {"WorkerId", "actor_id", "application", "deployment", "handle", "route"} for s in samples)


def test_the_library_state_of_a_capture_is_typed_once() -> None:
    cap = capture("serve_batcher_holds_lock")
    state = LibraryState.of(cap.snapshot.libraries, cap.collection.library_metrics)
    [dep] = state.deployments
    assert (dep.app, dep.name, dep.status) == ("rewards", "RewardModel", "HEALTHY")
    [replica] = dep.replicas
    assert replica.class_name == "ServeReplica:rewards:RewardModel" and replica.log_file_path
    assert replica.actor_id in {a["actor_id"] for a in cap.snapshot.actors}


# ---------------------------------------------------------------- Ray Data

def test_ray_data_housekeeping_calls_are_not_the_jobs_progress() -> None:
    # GIVEN a trainer in iter_batches while both MapWorker actors re-take their own lock, and Ray
    # Data's actor-location tracker answering a call in the window (examples/data_udf_actor_relocks.py)
    cap = capture("data_udf_actor_relocks")
    inputs = graph_inputs(cap.job, cap.snapshot, cap.collection)
    before, after = Rows.of(cap.snapshot).tasks, tasks_of(cap.tasks_after)
    seen = detect_progress(before, after, cap.snapshot.taken_at * 1000.0)
    # what used to read as progress: now a call Ray Data makes every round (snapshot.POLLING_TASKS), never progress
    assert not any("ActorLocationTracker" in s for s in seen), seen
    # THEN, with the dataset's operators read, Ray Data's machinery's calls are not progress
    assert detect_progress(before, after, cap.snapshot.taken_at * 1000.0, library_work(inputs).not_progress) == []
    diag = diagnose(cap)
    assert diag.verdict == "hang" and diag.causes[0].pattern == "lock-self-deadlock"
    assert {c.class_name for c in diag.causes[0].culprits} == {"MapWorker(MapBatches(Featurizer))"}


def test_a_call_another_jobs_driver_made_on_the_jobs_actor_is_not_its_progress() -> None:
    # GIVEN the same hang diagnosed a second time: the dashboard, answering the first diagnosis's
    # /api/data request, called Ray Data's stats actor from its own driver (another job), and the
    # State API files that call under the actor's job (recorded live; the first run was right, the
    # repeats said no-hang)
    cap = load_capture(ROOT / "tests" / "data" / "library" / "repeat_diagnosis_dashboard_call")
    job_id = cap.job["job_id"]
    before, after = Rows.of(cap.snapshot).tasks, tasks_of(cap.tasks_after)
    outsider = [t for t in after if t.name == "_StatsActor.get_datasets"]
    assert outsider and all(t.job_id == job_id and t.parent_task_id != f"{'f' * 40}{job_id}" for t in outsider)
    work = library_work(graph_inputs(cap.job, cap.snapshot, cap.collection))
    seen = detect_progress(before, after, cap.snapshot.taken_at * 1000.0, work.not_progress)
    assert any("get_datasets" in s for s in seen), seen  # what the repeats read as progress
    # THEN, given the job, another driver's call is no progress of it, and the hang is found
    assert detect_progress(before, after, cap.snapshot.taken_at * 1000.0, work.not_progress, job_id) == []
    diag = diagnose(cap)
    assert diag.verdict == "hang" and diag.causes[0].pattern == "lock-self-deadlock", diag.summary


def test_the_consumers_wait_inside_ray_data_leads_to_the_operators_actors() -> None:
    cap = capture("data_udf_actor_relocks")
    g = build_graph(graph_inputs(cap.job, cap.snapshot, cap.collection))
    trainer = next(n for n in g.nodes.values() if n.class_name == "Trainer")
    workers = {n.key for n in g.nodes.values() if n.class_name == "MapWorker(MapBatches(Featurizer))"}
    assert trainer.pattern == "data-iterator-wait"
    linked = {e.dst for e in g.out(trainer.key) if "operator MapBatches(Featurizer)" in e.evidence}
    assert linked == workers and len(workers) == 2


def test_without_the_dataset_state_the_location_tracker_is_still_no_progress() -> None:
    # Without Ray Data's own state the tracker's calls read as progress (a no-hang) until they were
    # listed as calls Ray Data makes every round (snapshot.POLLING_TASKS): the hang is found anyway.
    diag = diagnose(without_libraries(capture("data_udf_actor_relocks")))
    assert diag.verdict == "hang" and diag.causes[0].pattern == "lock-self-deadlock", diag.summary


def test_a_healthy_pipeline_progresses_by_its_output_stage_and_counters() -> None:
    # GIVEN a slow but healthy actor-pool UDF; the trainer's every sample waits in iter_batches
    cap = capture("healthy_data_pipeline")
    inputs = graph_inputs(cap.job, cap.snapshot, cap.collection)
    work = library_work(inputs)
    [stage] = work.output_ops.values()
    assert stage.name == "MapBatches(SlowFeaturizer)"
    # THEN the output stage's finished calls count, the upstream ReadRange tasks do not
    before, after = Rows.of(cap.snapshot).tasks, tasks_of(cap.tasks_after)
    kept = detect_progress(before, after, cap.snapshot.taken_at * 1000.0, work.not_progress)
    assert kept and all("MapBatches(SlowFeaturizer)" in s for s in kept)
    diag = diagnose(cap)
    assert diag.verdict == "no-hang"
    # AND the dataset's own counter advanced between its two readings
    assert any("delivered" in p for p in diag.progress), diag.progress


def test_a_library_actor_is_known_by_the_module_of_the_method_it_runs() -> None:
    cap = capture("data_udf_actor_relocks")
    by_class = {p.actor_class: library_method(p) for p in cap.collection.latest() if p.actor_class}
    assert by_class["MapWorker(MapBatches(Featurizer))"].startswith("ray/data/")  # _MapWorker.submit
    assert by_class["Trainer"] is None  # the job's own class


# ---------------------------------------------------------------- shared facts and safety

@pytest.mark.parametrize("name", ["data_udf_actor_relocks", "serve_batcher_holds_lock"])
def test_a_task_id_names_the_actor_it_ran_on(name: str) -> None:
    rows = Rows.of(capture(name).snapshot)
    actor_tasks = [t for t in rows.tasks if t.actor_id]
    assert actor_tasks and all(actor_of_task(t.task_id) == t.actor_id for t in actor_tasks)
    assert all(actor_of_task(t.task_id) is None for t in rows.tasks if not t.actor_id)
    assert actor_of_task(rows.jobs[0].driver_task_id if rows.jobs else None) is None


def test_the_library_endpoints_are_asked_only_while_their_actor_lives(silent_port: int) -> None:
    # The Ray Data endpoint *creates* Ray Data's stats actor when none exists: with no such actor
    # ALIVE nothing is asked (a silent port would make any request time out).
    client = DashboardClient(f"http://127.0.0.1:{silent_port}", timeout_s=0.5)
    dead = [{"name": "datasets_stats_actor", "ray_namespace": "_dataset_stats_actor", "state": "DEAD"},
            {"name": "SERVE_CONTROLLER_ACTOR", "ray_namespace": "serve", "state": "DEAD"}]
    started = time.monotonic()
    assert data_reading(client, "02000000", dead) is None and serve_reading(client, dead) is None
    assert time.monotonic() - started < 0.3


def test_recorded_library_readings_hold_no_configs() -> None:
    # What is kept of the Serve state: no runtime_env, user_config or actor options (secrets live there).
    for name in ("serve_batcher_holds_lock", "healthy_serve_under_load"):
        text = json.dumps(json.loads((CASES / name / "snapshot.json").read_text())["libraries"])
        assert "runtime_env" not in text and "user_config" not in text and "ray_actor_options" not in text
