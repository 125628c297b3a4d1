"""aggregate.py on real captures: groups, outliers, housekeeping, wrappers, options."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from debug_hang.model import Process
from debug_hang.parse.aggregate import (
    HOUSEKEEPING_RULES,
    RUNTIME_ONLY,
    WRAPPER_FRAMES,
    AggregateOptions,
    Group,
    Normalizer,
    aggregate,
    bare_function,
    role_of,
    short_file,
)
from debug_hang.parse.parsers import parse_path

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parent / "data" / "formats"
DUMPS = Path(__file__).resolve().parent / "data" / "dumps"
ALL_CAPTURES = [p for p in sorted(DATA.rglob("*")) if p.is_file() and p.suffix in (".txt", ".json")]


def parse(*paths: str) -> list[Process]:
    procs: list[Process] = []
    for p in paths:
        procs.extend(parse_path(str(DATA / p)))
    return procs


def replicate(proc: Process, pid: int) -> Process:
    clone = copy.deepcopy(proc)
    clone.pid = pid
    return clone


def test_ray_stack_groups_the_waiting_ranks_and_names_the_odd_rank() -> None:
    agg = aggregate(parse("ray-stack/ray_stack.txt"))
    top = agg.groups[0]
    assert top.size == 3 and top.processes == 3
    assert sorted(m.pid for m in top.members) == [8441, 8533, 8560]
    assert {m.role for m in top.members} == {"Rank"}
    assert [f.function for f in top.frames] == [
        "Worker.get_objects", "get", "Queue.get", "Rank.all_reduce", "Rank.train_step"]
    assert [f.line for f in top.frames] == [1007, 3009, 188, 36, 33]
    assert [(o.role, o.pid, o.alike, o.majority, o.role_size) for o in agg.outliers] == [
        ("Rank", 8532, 1, 3, 4)]
    odd = agg.outliers[0]
    assert [f.function for f in odd.frames] == ["Rank.load_shard", "Rank.train_step"]
    assert odd.title == "ray::Rank.train_step"
    assert agg.roles["Rank"] == 4


def test_housekeeping_is_hidden_by_default_and_counted() -> None:
    agg = aggregate(parse("ray-stack/ray_stack.txt"))
    # agents' threads too: ray stack dumps the DashboardAgent and RuntimeEnvAgent processes
    assert agg.hidden == {"ray-gc-thread": 17, "idle-selector": 15, RUNTIME_ONLY: 14,
                          "idle-thread-pool": 12, "ray-process-watcher": 8,
                          "ray-error-listener": 2}
    assert all(g.housekeeping is None for g in agg.groups)
    assert agg.threads == 78
    shown = aggregate(parse("ray-stack/ray_stack.txt"), AggregateOptions(show_housekeeping=True))
    assert sum(g.size for g in shown.groups) == 78
    gc = next(g for g in shown.groups if g.housekeeping == "ray-gc-thread")
    assert gc.size == 17 and gc.processes == 17  # one GC thread per worker, all alike
    # the outlier analysis ignores housekeeping either way
    assert [o.pid for o in shown.outliers] == [8532]


def test_idle_worker_main_loop_and_driver_threads_are_housekeeping() -> None:
    agg = aggregate(parse("ray/IDLE-11167.txt", "ray/driver-log_to_driver.txt"))
    assert agg.hidden == {RUNTIME_ONLY: 1, "ray-gc-thread": 2, "ray-error-listener": 1,
                          "ray-log-printer": 1}
    assert [[f.function for f in g.frames] for g in agg.groups] == [["main", "<module>"]]


def test_threaded_actor_threads_are_separate_groups_and_its_main_loop_is_hidden() -> None:
    agg = aggregate(parse("ray/Threaded.backward-8681.txt"))
    assert sorted(g.frames[0].function for g in agg.groups) == ["Threaded.backward", "Threaded.forward"]
    assert agg.hidden == {RUNTIME_ONLY: 1, "ray-gc-thread": 1}


def test_async_actor_shows_nothing_but_housekeeping() -> None:
    # the awaiting coroutine is invisible to py-spy: an idle loop and an empty main loop remain
    agg = aggregate(parse("ray/Poller.poll-8680.txt"))
    assert agg.groups == []
    assert agg.hidden == {RUNTIME_ONLY: 2, "ray-gc-thread": 1, "idle-selector": 1}


def test_text_json_and_native_dumps_of_one_stack_fall_in_one_group() -> None:
    procs = parse("ray/Rank.train_step-8441.txt", "ray/Rank.train_step-8441.json",
                  "ray/Rank.train_step-native.txt", "ray/Rank.train_step-8533.json")
    agg = aggregate(procs)
    assert len(agg.groups) == 1 and agg.groups[0].size == 4
    assert agg.groups[0].processes == 2  # pid 8441 three times, 8533 once
    with_native = aggregate(procs, AggregateOptions(native=True))
    assert len(with_native.groups) == 2  # the --native dump differs once native frames count


def test_faulthandler_and_pyspy_dumps_of_the_same_program_group_together() -> None:
    procs = parse("pyspy/threads.txt", "faulthandler/signal-py311.txt")
    agg = aggregate(procs)
    left = next(g for g in agg.groups if g.frames[0].function == "deadlock_left")
    assert left.size == 2
    assert {left.members[0].pid, left.members[1].pid} == {5671, None}


def test_line_numbers_split_groups_only_when_asked() -> None:
    procs = parse("pyspy/threads.txt", "pyspy-old/py-spy-0.3.14.txt")  # Python 3.11 vs 3.7
    def waits(groups: list[Group]) -> list[Group]:
        return [g for g in groups if any(f.function == "count_then_wait" for f in g.frames)]

    loose = waits(aggregate(procs).groups)
    assert [g.size for g in loose] == [2]  # Condition.wait at threading.py:327 (3.11) and :296 (3.7)
    strict = waits(aggregate(procs, AggregateOptions(lines=True)).groups)
    assert [g.size for g in strict] == [1, 1]
    assert sorted(g.frames[0].line for g in strict) == [296, 327]


def test_many_identical_workers_and_one_odd_one() -> None:
    waiting = parse("ray/Rank.train_step-8441.txt")[0]
    odd = parse("ray/Rank.train_step-8532.json")[0]
    odd.title = "ray::Rank.train_step"  # py-spy JSON carries no title; the collector adds it
    procs = [replicate(waiting, 30000 + i) for i in range(40)] + [odd]
    agg = aggregate(procs)
    assert [(g.size, g.processes) for g in agg.groups] == [(40, 40), (1, 1)]
    assert [(o.pid, o.alike, o.majority, o.role_size) for o in agg.outliers] == [(8532, 1, 40, 41)]


def test_outliers_fewest_alike_first_and_even_splits_reported() -> None:
    waiting = parse("ray/Rank.train_step-8441.txt")[0]
    sleeping = parse("ray/Rank.train_step-8532.txt")[0]
    holder = parse("ray/Holder.hold-8719.txt")[0]
    procs = [replicate(waiting, 100 + i) for i in range(5)] + \
        [replicate(sleeping, 200 + i) for i in range(2)]
    third = replicate(holder, 300)
    third.title = "ray::Rank.train_step"
    agg = aggregate(procs + [third])
    assert [(o.pid, o.alike) for o in agg.outliers] == [(300, 1), (200, 2), (201, 2)]
    even = aggregate([replicate(waiting, 1), replicate(waiting, 2), replicate(sleeping, 3),
                      replicate(sleeping, 4)])
    assert even.outliers == [] and even.no_majority == ["Rank"]


def test_collective_hang_rank_that_finished_early_is_the_outlier() -> None:
    folder = DUMPS / "gloo_skipped_allreduce"
    if not folder.is_dir():
        pytest.skip("tests/data/dumps/gloo_skipped_allreduce not recorded in this checkout")
    # the recording's manifest: the rank that skipped an all_reduce finished its method early, so
    # its title lost the method name (`ray::TrainWorker` among `ray::TrainWorker.train`)
    manifest = json.loads((folder / "MANIFEST.json").read_text())["processes"]
    titles = Counter(v["title"] for v in manifest.values() if v["class"] == "TrainWorker")
    usual = titles.most_common(1)[0][0]
    odd = sorted(int(pid) for pid, v in manifest.items()
                 if v["class"] == "TrainWorker" and v["title"] != usual)
    agg = aggregate(parse_path(str(folder)))
    assert [(o.role, o.pid, o.alike, o.role_size) for o in agg.outliers] == [
        ("TrainWorker", pid, 1, 4) for pid in odd]
    assert agg.outliers[0].frames == []  # idle in the worker main loop: nothing of its own
    top = agg.groups[0]
    assert [f.function for f in top.frames][:3] == ["all_reduce", "TrainWorker._allreduce_gradients",
                                                    "TrainWorker.train"]
    assert top.processes == 3


def test_failed_dumps_are_not_taken_for_idle_outliers() -> None:
    waiting = parse("ray/Rank.train_step-8441.txt")[0]
    procs = [replicate(waiting, 10 + i) for i in range(3)]
    failed = next(p for p in parse("ray-stack/ray_stack_with_error.txt") if p.pid == 12526)
    failed.title = "ray::Rank.train_step"  # as if a rank had exited between ps and py-spy
    agg = aggregate([*procs, failed])
    assert agg.outliers == [] and agg.roles == {"Rank": 3}


def test_role_of() -> None:
    procs = {p.pid: p for p in parse("ray-stack/ray_stack.txt")}
    assert role_of(procs[8532]) == "Rank"
    assert role_of(procs[8748]) == "prefetch"
    assert role_of(procs[2712]) is None  # ray::IDLE
    driver = parse("ray/driver.txt")[0]
    assert role_of(driver) == driver.title  # outside Ray titles: the command line
    driver.actor_class = "Trainer"
    assert role_of(driver) == "Trainer"


def test_names_and_files_are_normalized_across_dumpers() -> None:
    assert bare_function("Thread._bootstrap_inner") == "_bootstrap_inner"
    assert bare_function("_check_parent_via_pipe.<locals>.<lambda>") == "<lambda>"
    assert bare_function("<module>") == "<module>"
    assert short_file("/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py") == "threading.py"
    assert short_file("/x/site-packages/ray/_private/worker.py") == "ray/_private/worker.py"
    assert short_file("/work/main/tests/data/formats/targets/threads_target.py") == "threads_target.py"
    assert short_file("ray/_private/worker.py") == "ray/_private/worker.py"


def test_every_housekeeping_rule_matches_a_real_thread() -> None:
    norm = Normalizer(AggregateOptions())
    seen: set[str] = set()
    for path in ALL_CAPTURES:
        for proc in parse_path(str(path)):
            for t in proc.threads:
                _, kept, _ = norm.signature(t)
                kind = norm.housekeeping(False, t, kept)
                if kind:
                    seen.add(kind)
    # the Ray library loops of the catalog's list (Train, Data) are checked on the cases' and
    # library captures in tests/test_library_hangs.py; these captures hold Ray core's
    core = {"ray-gc-thread", "ray-error-listener", "ray-log-printer", "ray-process-watcher", "idle-thread-pool",
            "idle-selector"}
    assert core <= {r.kind for r in HOUSEKEEPING_RULES}
    assert core | {RUNTIME_ONLY} <= seen


def test_every_wrapper_rule_matches_a_real_frame() -> None:
    frames = {(f.function, short_file(f.file)) for path in ALL_CAPTURES
              for proc in parse_path(str(path)) for t in proc.threads for f in t.frames}
    if (DUMPS / "gloo_skipped_allreduce").is_dir():
        frames |= {(f.function, short_file(f.file))
                   for proc in parse_path(str(DUMPS / "gloo_skipped_allreduce"))
                   for t in proc.threads for f in t.frames}
    unmatched = [(fn, pat) for fn, pat in WRAPPER_FRAMES
                 if not any(re.search(fn, f) and re.search(pat, p) for f, p in frames)]
    # async_span_wrapper: an async actor's awaiting coroutine is invisible to py-spy (field
    # notes); c10d_logger: only in the torch dumps under tests/data/dumps/
    allowed = {r"(^|\.)async_span_wrapper$"}
    if not (DUMPS / "gloo_skipped_allreduce").is_dir():
        allowed.add(r"(^|\.)wrapper$")
    assert [fn for fn, _ in unmatched if fn not in allowed] == []


def test_to_dict_is_bounded_on_request() -> None:
    agg = aggregate(parse("ray-stack/ray_stack.txt"))
    doc = agg.to_dict(max_groups=2, max_members=1)
    assert len(doc["groups"]) == 2 and doc["groups_omitted"] == len(agg.groups) - 2
    assert doc["groups"][0]["members_omitted"] == 2
    assert doc["outliers"][0]["pid"] == 8532
    assert doc["hidden_housekeeping"]["ray-gc-thread"] == 17
