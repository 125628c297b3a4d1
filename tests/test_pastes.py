"""Pasted forms of real dumps (tests/data/pastes/README.md says how each was recorded or reshaped):
the innermost frames and the thread identity come out right, and the matcher names the blocking
frame and pattern where the mechanism is known. Plus adversarial shapes
(correctness under hypothesis; their time bounds are in benchmarks/bench_parse.py --adversarial)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debug_hang.analyse.collectives import mismatches
from debug_hang.analyse.patterns import match_process
from debug_hang.commands.match import latest_samples
from debug_hang.errors import BadInputError
from debug_hang.model import Process, Thread, process_to_dict, stacks_from_dict
from debug_hang.parse.parsers import parse_path, parse_text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from adversarial import SHAPES  # noqa: E402  (benchmarks/adversarial.py)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
PASTES = DATA / "pastes"
RESHAPED = PASTES / "reshaped"
HUNG_LOCK_LINES = [14, 19, 30, 34]  # hung_lock.py: Cache.get, Cache.refresh, main, <module>


def parse(path: Path) -> tuple[list[Process], list[str]]:
    warnings: list[str] = []
    return parse_path(str(path), warnings), warnings


def where(thread: Thread) -> list[tuple[str, str, int | None]]:
    return [(f.function, f.file, f.line) for f in thread.frames]


def by_name(proc: Process, name: str | None) -> Thread:
    return next(t for t in proc.threads if t.name == name)


def original(rel: str) -> Process:
    procs = parse_path(str(DATA / rel))
    assert len(procs) == 1
    return procs[0]


# -- fences ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name,source", [
    ("fenced-text.md", "dumps/dead_rank/TrainWorker-14680.txt"),
    ("fenced-python.md", "dumps/chain_three_actors/Trainer-21931.txt"),
    ("header-on-fence.md", "dumps/dead_rank/TrainWorker-14680.txt"),
])
def test_fenced_dump_reads_as_the_dump_itself(name: str, source: str) -> None:
    # GIVEN a real dump pasted inside Markdown fences (chat text around, or the header on the fence)
    procs, warnings = parse(RESHAPED / name)
    # THEN it is the same process, threads and frames as the dump read alone
    assert [process_to_dict(p) for p in procs] == [process_to_dict(original(source))]
    assert not any("cut short" in w for w in warnings)


# -- frames without headers -----------------------------------------------------------------

@pytest.mark.parametrize("name,source", [
    ("frames-only.txt", "dumps/chain_three_actors/Trainer-21931.txt"),
    ("frames-only-indented.txt", "dumps/dead_rank/TrainWorker-14680.txt"),
])
def test_frames_without_any_header_are_one_thread_of_unknown_ids(name: str, source: str) -> None:
    procs, warnings = parse(RESHAPED / name)
    assert len(procs) == 1 and len(procs[0].threads) == 1
    proc, thread = procs[0], procs[0].threads[0]
    assert (proc.pid, proc.source, thread.thread_id, thread.name) == (None, "frames", None, None)
    assert where(thread) == where(by_name(original(source), "MainThread"))
    assert any("without a thread header" in w for w in warnings)


def test_thread_header_without_id() -> None:
    procs, warnings = parse(RESHAPED / "thread-no-id.txt")
    dumped = original("pastes/interrupted/pyspy.txt")
    assert len(procs) == 1
    assert [(t.thread_id, t.name, t.active) for t in procs[0].threads] == \
        [(None, "MainThread", False), (None, "Thread-1 (heartbeat)", False)]
    for t in procs[0].threads:
        assert where(t) == where(by_name(dumped, t.name))
    assert any("without a thread id" in w for w in warnings)


@pytest.mark.parametrize("name,source", [
    ("named-threads.txt", "pastes/interrupted/pyspy.txt"),
    ("named-threads-deadlock.txt", "formats/pyspy/threads.txt"),
])
def test_thread_names_on_their_own_line_over_bare_frames(name: str, source: str) -> None:
    procs, _ = parse(RESHAPED / name)
    dumped = original(source)
    assert len(procs) == 1
    assert [t.name for t in procs[0].threads] == [t.name for t in dumped.threads]
    for t in procs[0].threads:
        assert t.thread_id is None
        assert where(t) == where(by_name(dumped, t.name))


def test_elided_frames_keep_the_innermost_and_say_so() -> None:
    procs, warnings = parse(RESHAPED / "elided.txt")
    dumped = original("dumps/chain_three_actors/Trainer-21931.txt")
    main, full = by_name(procs[0], "MainThread"), by_name(dumped, "MainThread")
    assert where(main) == where(full)[:3] + where(full)[-2:]
    assert main.frames[0].function == "Worker.get_objects"
    assert any("`...`" in w for w in warnings)


def test_arrow_chains_are_threads_innermost_first() -> None:
    # GIVEN `MainThread: <module> → main → refresh → get` (caller first: it starts at <module>)
    procs, warnings = parse(RESHAPED / "arrows.txt")
    dumped = original("pastes/interrupted/pyspy.txt")
    assert len(procs) == 1
    for t in procs[0].threads:
        expected = [f.function.rsplit(".", 1)[-1] for f in by_name(dumped, t.name).frames]
        assert [f.function for f in t.frames] == expected  # reversed to innermost first
        assert all(f.file == "" and f.line is None for f in t.frames)
    assert any("reversed" in w for w in warnings)


def test_arrow_chain_written_innermost_first_is_kept_as_written() -> None:
    procs = parse_text("_poll → poll → get\n")
    assert [f.function for f in procs[0].threads[0].frames] == ["_poll", "poll", "get"]


@pytest.mark.parametrize("name,source", [
    ("markdown-rendered.txt", "dumps/dead_rank/TrainWorker-14680.txt"),
    ("markdown-rendered-queue.txt", "pastes/ray_worker_logs/actor-9534.txt"),
    ("markdown-rendered-logging.txt", "pastes/interrupted-logging/pyspy.txt"),
])
def test_markdown_rendered_dump_is_repaired(name: str, source: str) -> None:
    # GIVEN a dump pasted without a fence and rendered (`<module>`/`<locals>` and the underscores
    # of `__init__` lost, indentation gone)
    procs, warnings = parse(RESHAPED / name)
    dumped = original(source)
    assert [(p.pid, p.title) for p in procs] == [(dumped.pid, dumped.title)]
    for t in procs[0].threads:
        want = [(("?" if f == "<module>" else f), file, line) for f, file, line in where(by_name(dumped, t.name))]
        assert where(t) == want
    assert any("rendered as Markdown" in w for w in warnings)


def test_markdown_repair_restores_init_files_and_methods() -> None:
    procs, _ = parse(RESHAPED / "markdown-rendered-logging.txt")
    main = by_name(procs[0], "MainThread")
    assert (main.frames[0].function, main.frames[0].file) == ("_acquireLock", "logging/__init__.py")
    assert main.frames[2].function == "Handler.__init__"


# -- tracebacks -----------------------------------------------------------------------------

def test_keyboard_interrupt_traceback_innermost_first_with_source_lines() -> None:
    procs, warnings = parse(PASTES / "interrupted" / "traceback.txt")
    assert len(procs) == 1 and procs[0].source == "traceback" and procs[0].pid is None
    tb = procs[0].threads[0]
    assert [f.line for f in tb.frames] == HUNG_LOCK_LINES  # the order py-spy gave while it hung
    assert tb.frames[0].function == "get" and tb.frames[0].file.endswith("hung_lock.py")
    assert tb.frames[0].code is not None and tb.frames[0].code.startswith("with self._lock:")
    assert procs[0].python == "3.11" or procs[0].python is None
    assert any("traceback" in w for w in warnings)


def test_traceback_in_the_standard_library_matches_the_py_spy_dump() -> None:
    procs, _ = parse(PASTES / "interrupted-logging" / "traceback.txt")
    dumped = by_name(original("pastes/interrupted-logging/pyspy.txt"), "MainThread")
    tb = procs[0].threads[0]
    assert [f.line for f in tb.frames] == [f.line for f in dumped.frames]
    assert tb.frames[0].function == "_acquireLock" and tb.frames[0].code == "_lock.acquire()"
    assert procs[0].python == "3.11"  # from the stdlib paths


def test_ray_driver_log_splits_worker_streams_and_keeps_pids() -> None:
    # GIVEN a real driver terminal: the actors' faulthandler stacks and a thread's traceback,
    # prefixed `(RayTrainWorker pid=N)` and interleaved, then the driver's KeyboardInterrupt
    procs, warnings = parse(PASTES / "ray_worker_logs" / "driver.log")
    driver = [p for p in procs if p.pid is None]
    assert len(driver) == 1 and driver[0].source == "traceback"
    assert driver[0].threads[0].frames[-1].function == "<module>"
    assert any(f.function == "get_objects" and f.file.endswith("ray/_private/worker.py")
               for f in driver[0].threads[0].frames)
    actors = {p.pid for p in procs if p.pid is not None}
    assert actors == {9534, 9535}
    assert all(p.actor_class == "RayTrainWorker" for p in procs if p.pid is not None)
    flush = [t for p in procs if p.pid == 9534 for t in p.threads if t.name == "FlushWorker"]
    assert len(flush) == 1 and flush[0].frames[0].function == "create_connection"
    for pid in actors:  # each actor's current thread waits in queue.Queue.get of train()
        last = max((p for p in procs if p.pid == pid), key=lambda p: p.sample)
        assert last.source == "faulthandler"
        funcs = [f.function for t in last.threads for f in t.frames]
        assert "train" in funcs and any(f.function == "get" and f.file.endswith("/queue.py")
                                        for t in last.threads for f in t.frames)
    assert any("line prefixes" in w for w in warnings)


# -- collective mismatch --------------------------------------------------------------------

def test_collective_mismatch_becomes_per_rank_facts_with_each_rank_traceback() -> None:
    procs, warnings = parse(PASTES / "collective_mismatch" / "combined.log")
    assert sorted(p.rank for p in procs if p.rank is not None) == [0, 1]
    rank = {p.rank: p for p in procs}
    assert rank[0].collective is not None and rank[1].collective is not None
    assert (rank[0].collective["op"], rank[0].collective["sequence"]) == ("BROADCAST", 5)
    assert (rank[1].collective["op"], rank[1].collective["sequence"]) == ("ALLREDUCE", 5)
    assert rank[0].collective["shapes"] == "4"
    assert rank[0].threads[0].frames[0].function == "broadcast"
    assert rank[1].threads[0].frames[0].function == "all_reduce"
    assert [f.function for f in rank[1].threads[0].frames[:3]] == ["all_reduce", "wrapper", "sync_step"]
    assert mismatches(procs) == {0: mismatches(procs)[1], 1: mismatches(procs)[0]}
    assert "differ in op" in mismatches(procs)[0]
    assert any("collective mismatch" in w for w in warnings)


def test_one_rank_log_gives_the_other_rank_a_process_without_a_stack() -> None:
    procs, warnings = parse(PASTES / "collective_mismatch" / "rank0.err")
    other = [p for p in procs if p.rank == 1]
    assert len(other) == 1 and other[0].threads == [] and other[0].pid is None
    assert other[0].collective is not None and other[0].collective["op"] == "ALLREDUCE"
    assert other[0].collective["reported_by"] == 0
    assert any("no stack in the input" in w for w in warnings)
    # the fact survives the stacks/v1 round trip
    again = stacks_from_dict(json.loads(json.dumps({"schema": "debug-hang/stacks/v1",
                                                    "processes": [process_to_dict(p) for p in procs]})))
    assert [p.collective for p in again] == [p.collective for p in procs]


# -- the matcher on the parsed pastes ------------------------------------------------------

def _pipe(path: Path) -> dict:  # type: ignore[type-arg]
    """`parse_stacks.py FILE --format json | match_patterns.py -`, as a user runs it."""
    parse_cmd = subprocess.run([sys.executable, str(ROOT / "scripts" / "parse_stacks.py"), str(path),
                                "--format", "json"], capture_output=True, timeout=120, check=True)
    match_cmd = subprocess.run([sys.executable, str(ROOT / "scripts" / "match_patterns.py"), "-"],
                               input=parse_cmd.stdout, capture_output=True, timeout=120, check=True)
    return json.loads(match_cmd.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("rel,pattern,frame", [
    ("reshaped/fenced-text.md", "collective-wait", ("all_reduce", "distributed_c10d.py")),
    ("reshaped/header-on-fence.md", "collective-wait", ("all_reduce", "distributed_c10d.py")),
    ("reshaped/fenced-python.md", "ray-get-wait", ("Worker.get_objects", "worker.py")),
    ("reshaped/frames-only.txt", "ray-get-wait", ("Worker.get_objects", "worker.py")),
    ("reshaped/frames-only-indented.txt", "collective-wait", ("all_reduce", "distributed_c10d.py")),
    ("reshaped/elided.txt", "ray-get-wait", ("Worker.get_objects", "worker.py")),
    ("reshaped/arrows-ascii.txt", "ray-get-wait", ("get_objects", "")),
    ("reshaped/markdown-rendered.txt", "collective-wait", ("all_reduce", "distributed_c10d.py")),
    ("reshaped/markdown-rendered-queue.txt", "queue-get-wait", ("Queue.get", "queue.py")),
    ("interrupted/traceback.txt", "lock-wait", ("get", "hung_lock.py")),
])
def test_parse_then_match_names_the_blocking_frame(rel: str, pattern: str, frame: tuple[str, str]) -> None:
    doc = _pipe(PASTES / rel)
    assert len(doc["processes"]) == 1
    proc = doc["processes"][0]
    assert (proc["verdict"], proc["pattern"]) == ("blocked", pattern)
    decided = [t for t in proc["threads"] if t["pattern"] == pattern]
    assert decided and decided[0]["frame"]["function"] == frame[0]
    assert decided[0]["frame"]["file"].endswith(frame[1])


def test_parse_then_match_on_a_driver_log_of_several_processes() -> None:
    doc = _pipe(PASTES / "ray_worker_logs" / "driver.log")
    got = {p["pid"]: p["pattern"] for p in doc["processes"]}
    assert got == {None: "ray-get-wait", 9534: "queue-get-wait", 9535: "queue-get-wait"}


def test_parse_then_match_names_the_collective_mismatch_on_each_rank() -> None:
    doc = _pipe(PASTES / "collective_mismatch" / "combined.log")
    got = {p["rank"]: p for p in doc["processes"]}
    assert {r: (p["verdict"], p["pattern"]) for r, p in got.items()} == \
        {0: ("blocked", "collective-mismatch"), 1: ("blocked", "collective-mismatch")}
    assert "rank 0 BROADCAST [4], rank 1 ALLREDUCE [4]" in got[0]["reason"]
    assert doc["summary"] == {"collective-mismatch": 2}


def test_parse_then_match_with_one_rank_log_names_both_ranks() -> None:
    doc = _pipe(PASTES / "collective_mismatch" / "rank1.err")
    assert {p["rank"]: p["pattern"] for p in doc["processes"]} == \
        {0: "collective-mismatch", 1: "collective-mismatch"}


def test_processes_of_unknown_pid_are_not_folded_together() -> None:
    procs = parse_path(str(RESHAPED / "arrows.txt")) + parse_path(str(RESHAPED / "frames-only.txt"))
    assert len(latest_samples(procs)) == 2


def test_busy_loop_needs_a_thread_state_a_traceback_has_none() -> None:
    procs, _ = parse(RESHAPED / "named-threads-deadlock.txt")
    verdict = match_process(procs[0])
    assert all(m.pattern != "busy-loop" for _, m in verdict.threads)
    dumped = original("formats/pyspy/threads.txt")  # py-spy saw the spinner run: busy-loop stays
    assert any(m.pattern == "busy-loop" for t, m in match_process(dumped).threads if t.name == "spinner")


def test_reanalyse_takes_a_folder_holding_pasted_processes(tmp_path: Path) -> None:
    from debug_hang.pipeline import reanalyse

    folder = tmp_path / "case"
    shutil.copytree(DATA / "cases" / "dead_rank", folder)
    before = reanalyse(folder)
    doc = json.loads((folder / "stacks.json").read_text())
    pasted = (parse_path(str(PASTES / "collective_mismatch" / "rank0.err"))
              + parse_path(str(RESHAPED / "frames-only.txt")) + parse_path(str(RESHAPED / "arrows.txt")))
    doc["processes"] += [process_to_dict(p) for p in pasted]
    (folder / "stacks.json").write_text(json.dumps(doc))
    after = reanalyse(folder)
    assert (after.verdict, after.summary) == (before.verdict, before.summary)


# -- hypothesis: the forms hold on any real dump -------------------------------------------

REAL_DUMPS = sorted(p for p in (DATA / "dumps").rglob("*.txt") if "state-" not in p.name)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL_DUMPS), st.sampled_from(["", "text", "python", "console", "py"]),
       st.booleans())
def test_any_real_dump_in_fences_reads_the_same(path: Path, lang: str, on_fence: bool) -> None:
    text = path.read_text()
    fenced = ("```" + text if on_fence else f"see:\n```{lang}\n{text}") + "```\nthanks\n"
    assert [process_to_dict(p) for p in parse_text(fenced)] == \
        [process_to_dict(p) for p in parse_text(text)]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(REAL_DUMPS), st.sampled_from(["", "  ", "    ", "\t"]), st.data())
def test_any_real_thread_as_bare_frames_reads_back(path: Path, indent: str, data: st.DataObject) -> None:
    proc = parse_text(path.read_text())[0]
    thread = data.draw(st.sampled_from([t for t in proc.threads if t.frames]))
    text = "".join(f"{indent}{f.function} ({f.file}{'' if f.line is None else f':{f.line}'})\n"
                   for f in thread.frames)
    got = parse_text(text)
    assert len(got) == 1 and len(got[0].threads) == 1
    assert where(got[0].threads[0]) == where(thread)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.from_regex(r"[a-z][a-z0-9]{0,8}(\.[a-z][a-z0-9]{0,8})?", fullmatch=True),
                min_size=2, max_size=12),
       st.sampled_from([" → ", " -> ", "->", "→", " => "]))
def test_arrow_chain_of_plain_names_reads_as_written(names: list[str], arrow: str) -> None:
    leaf = {"wait", "acquire", "select", "poll", "recv", "read", "sleep", "accept", "join",
            "barrier", "broadcast"}
    entry = {"main", "run"}
    first, last = names[0].rsplit(".", 1)[-1], names[-1].rsplit(".", 1)[-1]
    outer_first = first in entry or (last in leaf and first not in leaf)
    got = [f.function for f in parse_text(arrow.join(names) + "\n")[0].threads[0].frames]
    assert got == (names[::-1] if outer_first else names)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(REAL_DUMPS), min_size=2, max_size=3, unique=True), st.randoms())
def test_interleaved_rank_logs_read_apart(paths: list[Path], rnd: object) -> None:
    # GIVEN real dumps, one per rank, their lines interleaved at random as a merged log holds them
    import random

    assert isinstance(rnd, random.Random)
    queues = [[f"[rank{r}]: {line}" for line in p.read_text().splitlines()] for r, p in enumerate(paths)]
    merged: list[str] = []
    while any(queues):
        q = rnd.choice([q for q in queues if q])
        merged.append(q.pop(0))
    got = parse_text("\n".join(merged) + "\n")
    for r, p in enumerate(paths):
        alone = parse_text(p.read_text())
        mine = [x for x in got if x.rank == r]
        assert [where(t) for x in mine for t in x.threads] == [where(t) for x in alone for t in x.threads]
        assert [x.pid for x in mine] == [x.pid for x in alone]


def _raise_at_depth(depth: int) -> None:
    if depth == 0:
        raise TimeoutError("the wait timed out")
    _raise_at_depth(depth - 1)


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=60), st.booleans())
def test_real_tracebacks_read_innermost_first(depth: int, chained: bool) -> None:
    # GIVEN the traceback of a real exception raised `depth` calls down (and maybe re-raised)
    try:
        try:
            _raise_at_depth(depth)
        except TimeoutError:
            if chained:
                raise RuntimeError("step failed")  # noqa: B904 - the implicit chain is the point
            raise
    except (TimeoutError, RuntimeError):
        text = traceback.format_exc()
    procs = parse_text(text)
    assert len(procs) == 1
    first = procs[0].threads[0]  # the original exception's traceback comes first
    assert [f.function for f in first.frames[:depth + 1]] == ["_raise_at_depth"] * (depth + 1)
    assert first.frames[-1].function == "test_real_tracebacks_read_innermost_first"
    assert len(procs[0].threads) == (2 if chained else 1)


# -- adversarial shapes parse correctly, in linear time (time: bench_parse.py --adversarial) --

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(SHAPES)), st.integers(min_value=0, max_value=3000))
def test_adversarial_shapes_parse_or_fail_cleanly(shape: str, n: int) -> None:
    try:
        parse_text(SHAPES[shape](n))
    except BadInputError:
        pass


def test_deeply_nested_brackets_are_bad_input_not_a_recursion_error() -> None:
    with pytest.raises(BadInputError):
        parse_text(SHAPES["nested-lines"](1500))
    with pytest.raises(BadInputError):
        parse_text(SHAPES["nested-object-lines"](3000))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(REAL_DUMPS), st.integers(min_value=1, max_value=20_000))
def test_trailing_whitespace_runs_change_nothing(path: Path, spaces: int) -> None:
    text = path.read_text()
    padded = re.sub(r"(?m)$", " " * spaces, text)
    assert [process_to_dict(p) for p in parse_text(padded)] == [process_to_dict(p) for p in parse_text(text)]


def test_a_stacks_document_after_many_failed_json_starts_is_still_read() -> None:
    real = (DATA / "cases" / "dead_rank" / "stacks.json").read_text()
    procs = parse_text(SHAPES["schema-starts"](2000) + real)
    assert len(procs) == len(json.loads(real)["processes"])


def test_stacks_to_dict_is_asdict() -> None:
    from dataclasses import asdict

    for path in [*REAL_DUMPS, PASTES / "collective_mismatch" / "rank0.err"]:
        for proc in parse_text(path.read_text()):
            assert process_to_dict(proc) == asdict(proc)


def test_large_json_output_is_compact_and_the_same_document(tmp_path: Path) -> None:
    from debug_hang.commands import parse as parse_cmd

    dump = (DATA / "dumps" / "dead_rank" / "TrainWorker-14680.txt").read_text()
    many = "".join(re.sub(r"(?m)^(Process|Thread) (\d+)", lambda m, i=i: f"{m.group(1)} {int(m.group(2)) + i * 100_000}", dump)
                   for i in range(parse_cmd.COMPACT_JSON_OVER + 1))
    src = tmp_path / "many.txt"
    src.write_text(many)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "parse_stacks.py"), str(src)],
                         capture_output=True, timeout=300, check=True, text=True).stdout
    assert out.count("\n") == 1  # one compact line
    doc = json.loads(out)
    assert len(doc["processes"]) == parse_cmd.COMPACT_JSON_OVER + 1
    assert doc["processes"][0]["threads"][0]["frames"][0]["function"] == "all_reduce"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(REAL_DUMPS), st.sampled_from(["> ", ">", "> > "]))
def test_any_real_dump_quoted_in_markdown_reads_the_same(path: Path, quote: str) -> None:
    text = path.read_text()
    quoted = "".join(quote + line + "\n" for line in text.splitlines())
    assert [where(t) for p in parse_text(quoted) for t in p.threads] == \
        [where(t) for p in parse_text(text) for t in p.threads]


@pytest.mark.parametrize("rel", ["interrupted/traceback.txt", "interrupted-logging/traceback.txt"])
def test_traceback_pasted_without_indentation(rel: str) -> None:
    text = (PASTES / rel).read_text()
    flat = "".join(line.strip() + "\n" for line in text.splitlines()
                   if line.strip() and not set(line.strip()) <= set("^~"))
    got, want = parse_text(flat), parse_text(text)
    assert len(got) == 1
    assert [(f.function, f.file, f.line, f.code) for f in got[0].threads[0].frames] == \
        [(f.function, f.file, f.line, f.code) for f in want[0].threads[0].frames]


def test_ray_task_error_remote_frames_are_the_remote_process() -> None:
    # GIVEN a driver's uncaught RayTaskError: its own traceback through ray.get, then the remote
    # method's frames after `ray::ParameterStore.update() (pid=N, ip=...)`
    procs, _ = parse(PASTES / "ray_task_error" / "driver.log")
    driver, remote = procs
    assert driver.pid is None and driver.threads[0].frames[0].function == "get_objects"
    assert driver.threads[0].frames[-1].function == "<module>"
    assert (remote.pid, remote.title, remote.node_ip) == (7305, "ray::ParameterStore.update", "127.0.0.1")
    assert [(f.function, f.line) for f in remote.threads[0].frames] == [("update", 22)]
    assert match_process(driver).pattern == "ray-get-wait"


def test_real_mismatch_message_wording_variants() -> None:
    line = (PASTES / "collective_mismatch" / "rank1.err").read_text().splitlines()[-1]
    for text in (line, line.replace("is running collective", "is running inconsistent collective")):
        procs = parse_text(text + "\n")
        assert {p.rank: p.collective["op"] for p in procs if p.collective} == {0: "BROADCAST", 1: "ALLREDUCE"}


def test_summary_names_the_collectives_pytorch_reported(capsys: pytest.CaptureFixture[str]) -> None:
    from debug_hang.commands.parse import main

    assert main([str(PASTES / "collective_mismatch" / "rank0.err"), "--format", "summary"]) == 0
    out = capsys.readouterr().out
    assert "rank 0 BROADCAST seq 5 shapes [4]; rank 1 ALLREDUCE seq 5 shapes [4]" in out
