"""Hangs inside library code, on real dumps recorded here (tests/data/library/, see its README).

A thread blocked on a lock, a collective, a queue or ray.wait is read by what it waits on,
wherever the code lives; only Ray's named housekeeping loops (catalog: ray-housekeeping) are
benign, and only while they wait at their own idle point.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.analyse.graph import GraphInputs, build_graph, proc_key
from debug_hang.analyse.patterns import catalog, housekeeping_rules, load_catalog, match_process, match_thread
from debug_hang.errors import BadInputError
from debug_hang.model import Process, Thread, stacks_from_dict
from debug_hang.parse.parsers import parse_path
from debug_hang.rows import JobRow

pytestmark = pytest.mark.unit

LIBRARY = ROOT / "tests" / "data" / "library"


def load(name: str) -> list[Process]:
    """The node-probe form (stacks/v1, with source lines) of a recorded dump."""
    return stacks_from_dict(json.loads((LIBRARY / name).read_text()))


def thread(procs: list[Process], name: str) -> Thread:
    return next(t for p in procs for t in p.threads if t.name == name)


def graph_pattern(procs: list[Process]) -> dict[int | None, str | None]:
    """Each process's reading after the wait-for graph's per-process passes (no Ray state)."""
    verdicts = [match_process(p) for p in procs]
    g = build_graph(GraphInputs(job=JobRow.of({}), actors=[], tasks=[], placement_groups=[], node_totals=[], verdicts=verdicts))
    return {v.process.pid: g.nodes[proc_key(v.process)].pattern for v in verdicts}


def test_logging_dictconfig_against_a_handler_creating_thread_is_a_logging_lock_deadlock() -> None:
    # GIVEN dictConfig (module lock, then a handler's lock) against a handler's emit creating a handler
    procs = load("logging_dictconfig_handler/process.json")
    # THEN each thread is read by the lock it waits for, at the logging module's own frames
    waiter, holder = match_thread(thread(procs, "metrics")), match_thread(thread(procs, "MainThread"))
    assert (waiter.pattern, waiter.frame and waiter.frame.function) == ("lock-wait", "_acquireLock")
    assert (holder.pattern, holder.frame and holder.frame.function) == ("lock-wait", "Handler.acquire")
    # AND the process is the logging-lock deadlock (the holder named from the catalog's `holds`)
    assert set(graph_pattern(procs).values()) == {"logging-lock-deadlock"}


def test_logging_shutdown_flush_waiting_on_a_thread_that_logs_is_a_logging_lock_deadlock() -> None:
    procs = load("logging_shutdown_flush/process.json")
    uploader = match_thread(thread(procs, "FlushWorker"))
    assert (uploader.pattern, uploader.frame and uploader.frame.function) == ("lock-wait", "_acquireLock")
    assert match_thread(thread(procs, "MainThread")).pattern == "event-wait"  # Queue.join under flush
    assert set(graph_pattern(procs).values()) == {"logging-lock-deadlock"}


def test_a_paste_without_source_lines_still_names_the_library_locks() -> None:
    # GIVEN the same deadlock as py-spy's own JSON (what a user pastes: no source lines)
    procs = parse_path(LIBRARY / "logging_dictconfig_handler" / "process.pyspy.json")
    readings = {t.name: match_thread(t) for p in procs for t in p.threads}
    assert {n: m.pattern for n, m in readings.items()} == {"metrics": "lock-wait", "MainThread": "lock-wait"}
    assert set(graph_pattern(procs).values()) == {"logging-lock-deadlock"}


def test_gc_finaliser_reentering_a_library_lock_is_a_lock_self_deadlock() -> None:
    # GIVEN ThreadPoolExecutor.submit re-entered from __del__ during a GC pass inside it
    procs = load("gc_del_reenters_executor/process.json")
    match = match_thread(thread(procs, "MainThread"))
    assert match.pattern == "lock-wait"
    assert match.frame is not None and match.frame.function == "ThreadPoolExecutor.submit"
    assert match.frame.file.endswith("concurrent/futures/thread.py")
    assert set(graph_pattern(procs).values()) == {"lock-self-deadlock"}


@pytest.mark.parametrize(("case", "deciding"), [
    ("collective_broadcast_vs_allreduce", {0: "broadcast", 1: "all_reduce"}),
    ("collective_allgather_vs_barrier", {0: "all_gather_single", 1: "barrier"}),
    ("collective_coalesced_vs_barrier", {0: "all_gather_coalesced", 1: "barrier"}),
])
def test_ranks_in_different_collectives_are_read_through_wrapper_frames(case: str, deciding: dict[int, str]) -> None:
    # GIVEN two gloo ranks in different collectives, each reached through c10d_logger's wrapper
    for rank, function in deciding.items():
        procs = load(f"{case}/rank{rank}.json")
        match = match_thread(thread(procs, "MainThread"))
        # THEN the deciding frame is the collective itself, not a wrapper around it
        assert match.pattern == "collective-wait", (case, rank)
        assert match.frame is not None and match.frame.function == function
        assert match.frame.file.endswith("torch/distributed/distributed_c10d.py")


def test_dataloader_parent_waiting_on_a_killed_worker_is_a_dataloader_wait() -> None:
    procs = load("dataloader_worker_killed/parent.json")
    verdict = match_process(procs[0])
    assert verdict.pattern == "dataloader-wait"
    assert verdict.main is not None and verdict.main.frame is not None
    assert verdict.main.frame.function == "_MultiProcessingDataLoaderIter._try_get_data"
    # the main thread joining the training thread is not a lock wait
    assert match_thread(thread(procs, "MainThread")).pattern == "unknown"


def test_ray_train_v1_backend_executor_in_ray_wait_is_not_library_polling() -> None:
    # GIVEN the legacy Ray Train trial actor when a worker was SIGKILLed mid-step
    for dump in ("before_kill.json", "after_kill.json"):
        procs = load(f"ray_train_worker_killed_v1/{dump}")
        match = match_thread(thread(procs, "Thread-1 (<lambda>)"))
        # THEN BackendExecutor's check_for_failure is read as the ray.wait it is in
        assert match.pattern == "ray-get-wait"
        assert match.frame is not None and match.frame.function == "wait"
        assert match.frame.file.endswith("ray/_private/worker.py")
        assert any(f.function == "check_for_failure" for f in thread(procs, "Thread-1 (<lambda>)").frames)
        # AND the trial actor's main thread, waiting on the session queue that this live thread
        # feeds, is not taken for a consumer whose producer is gone
        trial = next(p for p in procs if (p.title or "").startswith("ray::_Inner"))
        assert graph_pattern([trial])[trial.pid] == "queue-get-wait"


def test_ray_train_v2_worker_killed_keeps_ray_housekeeping_benign() -> None:
    procs = load("ray_train_worker_killed/after_kill.json")
    readings = {t.name: match_thread(t).pattern for p in procs for t in p.threads if t.name}
    assert readings["PreemptionWatcher"] == "ray-housekeeping"
    assert readings["MonitoringThread(train_fn_with_final_checkpoint_flush)"] == "ray-housekeeping"
    assert readings["Thread-1 (tick_thread_run)"] == "ray-housekeeping"
    assert readings["TrainingThread(train_fn_with_final_checkpoint_flush)"] == "collective-wait"


def test_idle_workers_fetching_a_function_definition_are_not_idle() -> None:
    # GIVEN pooled ray::IDLE workers given a task while the GCS is paused
    procs = load("function_fetch_gcs_paused/processes.json")
    readings = {p.pid: match_process(p) for p in procs if (p.title or "").startswith("ray::IDLE")}
    fetching = {pid: v for pid, v in readings.items() if v.pattern == "function-definition-wait"}
    # THEN the ones in fetch_registered_method are read as that wait, decided at that frame ...
    assert len(fetching) == 2
    for verdict in fetching.values():
        assert verdict.verdict == "blocked"
        assert verdict.main is not None and verdict.main.frame is not None
        assert verdict.main.frame.function == "FunctionActorManager.fetch_registered_method"
    # ... and the truly idle ones (in Worker.main_loop) stay idle
    assert {v.verdict for pid, v in readings.items() if pid not in fetching} == {"idle"}


def test_no_catalog_pattern_is_benign_for_any_ray_library_thread() -> None:
    # the rule that took every thread of Ray's library code for polling is gone
    assert "ray-library-thread" not in catalog()
    # (NCCL's proxy and ProcessGroupNCCL's watchdog threads are native threads, not Ray's Python library)
    assert [p.id for p in catalog().values() if p.kind == "benign"] == ["ray-housekeeping", "idle-worker",
                                                                        "nccl-background-thread"]


def test_a_housekeeping_loop_blocked_on_a_lock_is_read_by_the_lock() -> None:
    # GIVEN a real housekeeping thread whose innermost frame is made a logging lock take
    procs = load("ray_train_worker_killed/after_kill.json")
    watcher = thread(procs, "PreemptionWatcher")
    lock_frames = thread(load("logging_dictconfig_handler/process.json"), "metrics").frames[:3]
    blocked = Thread(name=watcher.name, os_thread_id=watcher.os_thread_id, active=False,
                     frames=[*lock_frames, *watcher.frames[2:]])
    # THEN it is a lock wait, not Ray's polling
    assert match_thread(watcher).pattern == "ray-housekeeping"
    assert match_thread(blocked).pattern == "lock-wait"


def test_every_named_housekeeping_loop_matches_a_real_thread() -> None:
    # GIVEN every real capture recorded under tests/data
    seen: set[str] = set()
    data = ROOT / "tests" / "data"
    files = [*sorted(data.glob("cases/*/stacks.json")), *sorted(LIBRARY.glob("*/*.json")),
             *sorted(p for p in data.glob("formats/*/*") if p.is_file() and p.suffix in (".txt", ".json"))]
    for path in files:
        try:
            procs = parse_path(path)
        except BadInputError:
            continue  # not a stack dump (a README, state rows)
        for proc in procs:
            for t in proc.threads:
                if match_thread(t).pattern != "ray-housekeeping":
                    continue
                seen |= {r.name for r in housekeeping_rules() if r.name and any(r.matches(f) for f in t.frames)}
    # THEN each entry of the one list was seen on a real thread
    assert {r.name for r in housekeeping_rules()} <= seen


def test_overridden_by_must_name_catalog_patterns(tmp_path: Path) -> None:
    text = (ROOT / "references" / "patterns.yaml").read_text()
    bad = tmp_path / "patterns.yaml"
    bad.write_text(text.replace("overridden_by: [lock-wait,", "overridden_by: [no-such-wait,"))
    with pytest.raises(BadInputError, match="no-such-wait"):
        load_catalog(bad)


@pytest.mark.parametrize("dump", ["pyspy/threads.txt", "pyspy-old/py-spy-0.1.11.txt", "pyspy-old/py-spy-0.2.2.txt",
                                  "pyspy-old/py-spy-0.3.14.txt"])
def test_waits_are_read_the_same_with_bare_function_names(dump: str) -> None:
    # GIVEN one target dumped by py-spy 0.4 (Event.wait, class-qualified) and by older py-spy (bare `wait`)
    procs = parse_path(ROOT / "tests" / "data" / "formats" / dump)
    waiter = next(t for p in procs for t in p.threads if any(f.function.endswith("count_then_wait") for f in t.frames))
    # THEN the Event.wait is an event-wait either way, decided in threading.py
    match = match_thread(waiter)
    assert match.pattern == "event-wait"
    assert match.frame is not None and match.frame.file.endswith("threading.py")
