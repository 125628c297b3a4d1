"""The analysis (matcher, wait-for graph, verdict) re-run on real recorded captures.

Each folder under tests/data/cases/ was written by a real diagnosis of a real hang from
examples/ (tests/test_examples.py with DEBUG_HANG_RECORD=1). Re-analysing it must still name the
root cause the example declares — no cluster needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import ROOT, culprit_matches, expected_of

from debug_hang.analyse.rootcause import find_cycles
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown

pytestmark = pytest.mark.unit

CASES = sorted(p for p in (ROOT / "tests" / "data" / "cases").glob("*") if (p / "stacks.json").exists())
SCHEMA = json.loads((ROOT / "references" / "diagnosis.schema.json").read_text())


@pytest.mark.parametrize("case", CASES, ids=[p.name for p in CASES])
def test_recorded_case_still_yields_its_root_cause(case: Path) -> None:
    # GIVEN the real capture of an example's hang, and what the example declares
    expected = expected_of(case.name)
    # WHEN the current code re-analyses it
    diag = reanalyse(case)
    doc = to_json(diag)
    # THEN it is a valid diagnosis naming the same verdict, pattern and culprits
    jsonschema.validate(doc, SCHEMA)
    assert doc["verdict"] in expected.get("verdicts", [expected["verdict"]]), doc["summary"]
    if expected["verdict"] != "hang":
        return
    top = doc["root_causes"][0]
    assert top["pattern"] == expected["pattern"], doc["summary"]
    for culprit in expected["culprits"]:
        assert culprit_matches(culprit, top["culprits"]), top
    report = render_markdown(diag)
    assert "## Blocking chain" in report and "← root cause" in report


RECORDED = sorted(p for p in [*CASES, *(ROOT / "tests" / "data" / "captures").glob("*")] if (p / "diagnosis.json").exists())


def _findings(doc: dict[str, Any]) -> list[tuple[str, list[tuple[str, str | None, int | None, int | None]]]]:
    return [(c["pattern"], [(x["kind"], x.get("class_name"), x.get("pid"), x.get("rank")) for x in c["culprits"]])
            for c in doc["root_causes"]]


@pytest.mark.parametrize("case", RECORDED, ids=[f"{p.parent.name}/{p.name}" for p in RECORDED])
def test_a_saved_folder_re_analyses_to_what_the_live_run_said(case: Path) -> None:
    # GIVEN the folder a live diagnosis wrote, with the diagnosis it printed
    live = json.loads((case / "diagnosis.json").read_text())
    # WHEN the folder is re-analysed
    again = to_json(reanalyse(case))
    # THEN the verdict, the root causes and their culprits are the live run's
    assert again["verdict"] == live["verdict"], (again["summary"], live["summary"])
    assert _findings(again) == _findings(live)


def test_a_folder_whose_task_listing_failed_stays_inconclusive() -> None:
    # GIVEN a real capture whose State API task listing answered HTTP 503 (tests/data/captures/README.md)
    folder = ROOT / "tests" / "data" / "captures" / "task_listing_refused"
    # WHEN re-analysed THEN inconclusive, naming the unread endpoint and the stack-only candidate
    diag = reanalyse(folder)
    assert diag.verdict == "inconclusive"
    assert "/api/v0/tasks" in diag.summary and "poll-never-satisfied in ReplayBuffer" in diag.summary


SERVE_CALLERS = ROOT / "tests" / "data" / "captures" / "serve_callers_no_task_rows"
LATE_ROWS = ROOT / "tests" / "data" / "captures" / "late_task_rows"


def _first_reading_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The analysis as it was before it took the second reading's task rows: the dp workers'
    calls to the aggregator are then missing, and their waits lead to no task."""
    from debug_hang.analyse import analysis

    monkeypatch.setattr(analysis, "with_late_rows", lambda rows, after: rows)


def test_guessed_waits_between_sibling_callers_close_no_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN sibling tasks of one caller waiting in ray.get on objects no task row produces (the
    # late_task_rows capture read from its first task listing only)
    _first_reading_only(monkeypatch)
    diag = reanalyse(LATE_ROWS)
    guessed = [e for e in diag.graph.edges if e.guessed]
    # THEN a later one may be guessed to wait on an earlier one (an ObjectRef passed in), never the
    # reverse, and no deadlock is found among them
    assert guessed
    made = {t.task_id: t.creation_time_ms for t in diag.rows.tasks}
    for edge in guessed:
        src, dst = diag.graph.nodes[edge.src], diag.graph.nodes[edge.dst]
        assert made[str(src.task_id)] > made[str(dst.task_id)]
    assert not find_cycles(diag.graph) and not any(c.cycle for c in diag.causes)


def test_a_guessed_cycle_is_still_no_deadlock(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the same capture with the creation order rule switched off (siblings guessed to wait
    # on each other, as the live run had it)
    from debug_hang.analyse.graph import raycalls

    real = raycalls.edges_from_parents

    def unordered(*args: Any, **kwargs: Any) -> int:
        kwargs.pop("before_ms", None)
        return real(*args, **kwargs)

    _first_reading_only(monkeypatch)
    monkeypatch.setattr(raycalls, "edges_from_parents", unordered)
    diag = reanalyse(LATE_ROWS)
    # THEN the guessed edges form a loop, and still no deadlock is reported
    pairs = {(e.src, e.dst) for e in diag.graph.edges if e.guessed}
    assert any((dst, src) in pairs for src, dst in pairs)
    assert not find_cycles(diag.graph) and diag.verdict != "hang"


def test_a_serve_handle_wait_is_no_guess_and_its_unfollowed_chain_is_inconclusive() -> None:
    # GIVEN two callers in DeploymentResponse.result, in a capture holding no Serve state (taken
    # before the tool read it): Serve requests have no task rows
    diag = reanalyse(SERVE_CALLERS)
    # THEN their wait is read as a Serve handle's, not guessed to be on each other (a ray.get
    # inside Serve waits on Serve's own objects, never on ObjectRefs the caller handed in)
    assert not any(e.guessed for e in diag.graph.edges)
    assert diag.causes[0].pattern == "serve-response-wait"
    # AND the chain ends in a wait nobody could follow: inconclusive, naming the callers as where to look
    assert diag.verdict == "inconclusive"
    assert "could not be followed" in diag.summary and "evaluate" in diag.summary


QUEUES = ROOT / "tests" / "data" / "captures" / "queues_in_a_loop"


def test_a_loop_through_two_bounded_queues_names_who_reads_too_late() -> None:
    # GIVEN the driver blocked putting into a full request queue and the Scorer blocked putting
    # into a full result queue nobody has ever read from
    diag = reanalyse(QUEUES)
    # THEN the queues' waits lead to the processes on the other side, the loop is one finding,
    # and the driver (it feeds the Scorer and is the one to read results) comes first
    top = diag.causes[0]
    assert diag.verdict == "hang" and top.pattern == "queue-cycle" and top.cycle
    assert [c.name.split(" (")[0] for c in top.culprits] == ["driver", "Scorer"]
    reasons = {e.why for e in diag.graph.edges if diag.graph.nodes[e.src].class_name == "_QueueActor"}
    assert reasons == {"queue-get-wait", "never-read"}


def test_a_full_queue_nobody_read_is_no_finding_while_a_process_is_free(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN the same capture, with the Scorer's reading changed to idle (free to read the results)
    import dataclasses

    from debug_hang.analyse import analysis

    real = analysis._match_with_cpu

    def scorer_idle(proc: Any, collection: Any) -> Any:
        verdict = real(proc, collection)
        return dataclasses.replace(verdict, verdict="idle") if proc.actor_class == "Scorer" else verdict

    monkeypatch.setattr(analysis, "_match_with_cpu", scorer_idle)
    diag = reanalyse(QUEUES)
    # THEN no edge guesses the results' reader, and no queue loop is reported
    assert not any(e.why == "never-read" for e in diag.graph.edges)
    assert all(c.pattern != "queue-cycle" for c in diag.causes)


def test_task_rows_only_the_second_reading_had_are_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN workers waiting on calls the State API showed only in its second reading
    folder = ROOT / "tests" / "data" / "captures" / "late_task_rows"
    diag = reanalyse(folder)
    graph = diag.graph
    workers = [k for k, n in graph.nodes.items() if n.name == "dp_worker"]
    # THEN each worker's wait leads to the aggregator its call is on
    assert workers and all(any(graph.nodes[e.dst].class_name == "GradientAggregator" for e in graph.out(k))
                           for k in workers)
    # (and without the second reading's rows, most of them would lead nowhere)
    from debug_hang.analyse import analysis

    monkeypatch.setattr(analysis, "with_late_rows", lambda rows, after: rows)
    graph = reanalyse(folder).graph
    assert sum(any(graph.nodes[e.dst].class_name == "GradientAggregator" for e in graph.out(k)) for k in workers) < len(workers)


def test_cycle_case_names_every_member() -> None:
    case = ROOT / "tests" / "data" / "cases" / "actor_call_cycle"
    if not case.exists():
        pytest.skip("no recorded actor_call_cycle capture")
    diag = reanalyse(case)
    cycles = find_cycles(diag.graph)
    assert len(cycles) == 1
    names = {diag.graph.nodes[k].class_name for k in cycles[0]}
    assert names == {"ParameterServer", "Learner"}


def test_async_actor_awaiting_its_calls_stays_on_the_chain() -> None:
    # GIVEN an async router that awaits a stuck engine: its own stack shows only an idle loop
    case = ROOT / "tests" / "data" / "cases" / "async_router_awaits"
    if not case.exists():
        pytest.skip("no recorded async_router_awaits capture")
    # WHEN the capture is re-analysed THEN the chain runs driver → router → engine
    chain = to_json(reanalyse(case))["chains"][0]
    assert [n["name"].split(" (")[0] for n in chain] == ["driver", "InferenceRouter", "GenerationEngine"]
    assert chain[1]["state"] == "blocked" and chain[1]["waits_on"].startswith("waits for GenerationEngine.generate")


def test_a_call_into_another_jobs_detached_actor_is_followed() -> None:
    # GIVEN a job whose only call goes to a detached actor of another job (filed under that job)
    case = ROOT / "tests" / "data" / "cases" / "detached_service_never_published"
    if not case.exists():
        pytest.skip("no recorded detached_service_never_published capture")
    diag = reanalyse(case)
    # WHEN re-analysed THEN the chain goes from this job's driver into the other job's actor
    chain = to_json(diag)["chains"][0]
    assert [n["kind"] for n in chain] == ["driver", "actor"]
    assert chain[1]["name"] == "WeightServer" and chain[1]["pattern"] == "event-never-set"
    server = next(a for a in diag.snapshot.actors if a["class_name"] == "WeightServer")
    assert server["job_id"] != diag.job_id


def test_a_job_that_already_ended_is_not_called_hung(tmp_path: Path) -> None:
    # GIVEN a real capture of a hang, as if the job had ended by the time it was diagnosed
    import shutil

    case = ROOT / "tests" / "data" / "cases" / "producer_never_produces"
    if not case.exists():
        pytest.skip("no recorded producer_never_produces capture")
    folder = tmp_path / "case"
    shutil.copytree(case, folder)
    snap = json.loads((folder / "snapshot.json").read_text())
    job_id = json.loads((folder / "diagnosis.json").read_text())["job_id"]
    for job in snap["jobs"]:
        if job.get("job_id") == job_id:
            job["status"], job["message"] = "SUCCEEDED", "Job finished successfully."
    (folder / "snapshot.json").write_text(json.dumps(snap))
    # WHEN it is re-analysed THEN the verdict says so instead of naming a culprit
    diag = reanalyse(folder)
    assert diag.verdict == "no-hang" and "SUCCEEDED" in diag.summary and not diag.causes


def test_a_task_in_an_infeasible_placement_group_leads_to_the_group() -> None:
    # GIVEN a real capture: the driver waits on a task scheduled into a placement group whose
    # bundle asks for a custom resource no node has
    case = ROOT / "tests" / "data" / "captures" / "task_in_infeasible_pg"
    # WHEN re-analysed THEN the group, by name, is the culprit (not Ray's CPU_group_<i>_<id> names)
    diag = reanalyse(case)
    top = diag.causes[0]
    assert top.pattern == "placement-group-infeasible"
    assert [c.name for c in top.culprits] == ["placement group eval_pg"]
    assert any("accelerator_x" in e for e in top.culprits[0].evidence)
    assert "_group_" not in diag.summary


def test_named_actors_are_called_by_their_names() -> None:
    # GIVEN two actors of one class created with .options(name=...) that deadlock on each other's locks
    diag = reanalyse(ROOT / "tests" / "data" / "cases" / "lock_held_across_remote_call")
    cause = diag.causes[0]
    # THEN the culprits carry the names a user gave them, in the summary and in diagnosis.json
    assert {c.actor_name for c in cause.culprits} == {"shard_a", "shard_b"}
    assert 'Shard "shard_a"' in diag.summary and 'Shard "shard_b"' in diag.summary
    doc = to_json(diag)
    assert doc["root_causes"][0]["culprit"]["actor_name"] in ("shard_a", "shard_b")
    assert {c["actor_name"] for c in doc["root_causes"][0]["culprits"]} == {"shard_a", "shard_b"}
    jsonschema.validate(doc, SCHEMA)


def test_memory_a_waiting_parent_reserved_is_held_for_its_starved_children() -> None:
    # GIVEN parents that reserve the node's `memory` resource and wait in ray.get on children
    # that need memory too (tests/data/captures/README.md): a task in ray.get lends out its CPU only
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "memory_held_by_waiting_parents")
    [cause] = diag.causes
    # THEN the parents hold the memory the children wait for, and wait for the children: a cycle
    assert cause.pattern == "resource-starvation" and cause.cycle and diag.verdict == "hang"
    assert {c.label().split(" (")[0] for c in cause.culprits} == {"process_partition"} and len(cause.culprits) == 2
    held = [e.evidence for e in diag.graph.edges if e.why == "resource-starvation"]
    assert len(held) == 2 and all("holds {memory: " in text and "GiB}" in text for text in held), held


def test_a_child_reading_the_stdin_its_waiting_parent_holds_open_closes_a_cycle() -> None:
    # GIVEN an actor in proc.wait() on a child that reads its stdin to the end, the actor holding
    # the pipe's write end open (tests/data/captures/README.md)
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "child_reads_stdin_parent_holds_open")
    [cause] = diag.causes
    # THEN parent and child wait for each other, and the parent, which must close the pipe, is first
    assert diag.verdict == "hang" and cause.pattern == "pipe-full-deadlock" and cause.cycle
    assert cause.culprits[0].class_name == "Sorter" and cause.culprits[0].kind != "process"
    edge = next(e for e in diag.graph.edges if e.why == "pipe-read-wait")
    assert diag.graph.nodes[edge.dst].class_name == "Sorter" and "stdin (fd 0" in edge.evidence


def test_a_poll_of_a_working_child_is_a_wait_on_its_work() -> None:
    # GIVEN an actor in a `while proc.poll() is None: time.sleep(5)` loop while its child compresses
    # shards to files (healthy; tests/data/captures/README.md)
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "parent_polls_working_child")
    packer = next(n for n in diag.graph.nodes.values() if n.class_name == "Packer" and n.kind != "process")
    # THEN its poll is a wait for the child, and the child's bytes on disk are the job's progress
    assert packer.pattern == "child-process-wait" and [diag.graph.nodes[e.dst].pid for e in diag.graph.out(packer.key)]
    assert diag.verdict == "no-hang" and "wrote" in diag.summary and not diag.causes


def test_serve_run_waits_on_replicas_that_starve_in_their_init() -> None:
    # GIVEN serve.run deploying replicas whose __init__ waits on a task needing the CPUs they hold
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "serve_replicas_starve_in_init")
    # THEN one root cause: the replicas, in a cycle through the scheduler; the driver only waits
    [cause] = diag.causes
    assert diag.verdict == "hang" and cause.pattern == "resource-starvation" and cause.cycle
    assert {c.class_name for c in cause.culprits} == {"ServeReplica:ranker:Ranker"} and len(cause.culprits) == 4
    driver = next(n for n in diag.graph.nodes.values() if n.kind == "driver")
    assert driver.pattern == "serve-deploy-wait"
    assert {diag.graph.nodes[e.dst].class_name for e in diag.graph.out(driver.key)} == {"ServeReplica:ranker:Ranker"}


def test_an_event_a_pending_timer_will_set_is_no_hang() -> None:
    # GIVEN an actor waiting on an Event that a threading.Timer of the same process sets in two minutes
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "timer_sets_the_event_later")
    # THEN the Timer counts as a setter: no event-never-set, no hang, and the evidence says why
    assert diag.verdict != "hang" and all(c.pattern != "event-never-set" for c in diag.causes)
    node = next(n for n in diag.graph.nodes.values() if n.class_name == "WarmStart")
    assert any("threading.Timer" in e for e in node.evidence), node.evidence


def test_a_self_call_waiting_for_the_lock_its_caller_holds_is_a_deadlock() -> None:
    # GIVEN a threaded actor whose step() holds a lock and waits on its own append(), which runs in
    # another thread and waits for that lock
    diag = reanalyse(ROOT / "tests" / "data" / "captures" / "log_handler_calls_own_actor_under_lock")
    # THEN the two threads wait on each other: a hang in that actor, not a chain ending in a lock wait
    assert diag.verdict == "hang" and diag.causes[0].pattern == "lock-order-deadlock"
    assert {c.class_name for c in diag.causes[0].culprits} == {"RunTracker"}


def test_a_loop_tests_a_childs_state_by_the_calls_that_read_it() -> None:
    from debug_hang.analyse.graph.children import _CHILD_STATE

    child_state = ["while proc.poll() is None:", "if p.is_alive():", "rc = proc.wait(timeout=5)", "while p.exitcode is None:",
                   "pid, status = os.waitpid(pid, os.WNOHANG)"]
    other = ['while not os.path.exists(os.path.join(out, "done")):', 'print(", ".join(names))', "time.sleep(5)"]
    assert all(_CHILD_STATE.search(line) for line in child_state)
    assert not any(_CHILD_STATE.search(line) for line in other)


def test_a_parent_with_another_thread_in_job_code_may_still_close_the_childs_stdin() -> None:
    # GIVEN the stdin capture, with the waiting parent given a second thread in its own job code
    # (a copy of its waiting thread: a writer thread that may write to or close the pipe)
    import copy
    import time

    from debug_hang.analyse.analysis import analyse
    from debug_hang.pipeline import load_capture

    cap = load_capture(ROOT / "tests" / "data" / "captures" / "child_reads_stdin_parent_holds_open")
    for proc in cap.collection.processes:
        if proc.actor_class == "Sorter":
            main = next(t for t in proc.threads if any(f.function.startswith("Sorter.") for f in t.frames))
            other = copy.deepcopy(main)
            other.os_thread_id, other.name = (main.os_thread_id or 0) + 1, "feeder"
            proc.threads.append(other)
    diag = analyse(cap.job, cap.snapshot, cap.collection, cap.tasks_after, "", "", [], [], time.monotonic())
    # THEN no pipe deadlock is claimed: the child's wait on its stdin is not proven
    assert all(c.pattern != "pipe-full-deadlock" for c in diag.causes)
    assert not [e for e in diag.graph.edges if e.why == "pipe-read-wait"]
