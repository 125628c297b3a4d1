"""parsers.py on real captures of every format (tests/data/formats/README.md says how each was
made), plus damaged input: empty, binary, non-UTF-8, cut short, garbage, and random mutations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debug_hang.errors import BadInputError
from debug_hang.model import Frame, Process, Thread, split_ray_title, stacks_from_dict, stacks_to_dict
from debug_hang.parse.aggregate import AggregateOptions, aggregate
from debug_hang.parse.parsers import (
    is_python_file,
    parse_bytes,
    parse_path,
    parse_text,
    split_frame,
)

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parent / "data" / "formats"
THREAD_NAMES = ["MainThread", "deadlock-left", "deadlock-right", "sleeper", "counter",
                "native-wait", "spinner"]


def one(path: str) -> Process:
    procs = parse_path(str(DATA / path))
    assert len(procs) == 1, [p.pid for p in procs]
    return procs[0]


def thread(proc: Process, name: str) -> Thread:
    return next(t for t in proc.threads if t.name == name)


def funcs(t: Thread, native: bool = True) -> list[str]:
    return [f.function for f in t.frames if native or not f.native]


# -- py-spy 0.4 text --------------------------------------------------------------------------

def test_pyspy_text_process_header_threads_and_frames() -> None:
    proc = one("pyspy/threads.txt")
    assert proc.pid == 5671
    assert proc.title is not None and proc.title.startswith("/work/main/.venv/bin/python ")
    assert proc.title.endswith("--spin --lifetime 60")
    assert proc.python == "3.11.7"
    assert proc.source == "py-spy-text"
    assert [t.name for t in proc.threads] == THREAD_NAMES
    assert [t.os_thread_id for t in proc.threads] == list(range(5671, 5678))
    assert proc.threads[0].thread_id == "5671"
    main = thread(proc, "MainThread")
    assert funcs(main) == ["Thread._wait_for_tstate_lock", "Thread.join", "wait_for_workers",
                           "main", "<module>"]  # innermost first
    assert (main.frames[0].file, main.frames[0].line) == ("threading.py", 1139)
    assert (main.frames[2].file, main.frames[2].line) == ("threads_target.py", 66)
    left = thread(proc, "deadlock-left")
    assert (left.frames[0].function, left.frames[0].line) == ("deadlock_left", 27)
    assert (thread(proc, "deadlock-right").frames[0].line) == 34
    assert not any(f.native for t in proc.threads for f in t.frames)


def test_pyspy_text_thread_states_and_gil() -> None:
    proc = one("pyspy/threads.txt")
    spinner = thread(proc, "spinner")
    assert spinner.active is True and spinner.owns_gil is True  # "(active+gil)"
    for t in proc.threads:
        if t is not spinner:
            assert t.active is False and t.idle is True and t.owns_gil is False, t.name


def test_pyspy_native_frames_are_flagged_and_cpp_names_keep_their_parentheses() -> None:
    proc = one("pyspy/threads-native.txt")
    nat = thread(proc, "native-wait")
    assert funcs(nat)[:8] == ["pause", "0x7faa16df6f7a", "0x7faa16df640e", "ffi_call",
                              "_call_function_pointer", "_ctypes_callproc", "PyCFuncPtr_call",
                              "native_wait"]
    pause, callproc, user = nat.frames[0], nat.frames[4], nat.frames[7]
    assert (pause.file, pause.line, pause.native) == ("libc.so.6", None, True)
    assert (callproc.file, callproc.line, callproc.native) == ("callproc.c", 943, True)
    assert (user.file, user.line, user.native) == ("threads_target.py", 60, False)
    assert funcs(nat, native=False) == ["native_wait", "Thread.run", "Thread._bootstrap_inner",
                                        "Thread._bootstrap"]
    # ray stack (always --native on Linux) carries C++ names with parentheses inside
    procs = parse_path(str(DATA / "ray-stack" / "ray_stack.txt"))
    producer = next(p for p in procs if p.pid == 2845)
    cpp = [f for f in producer.threads[0].frames if "HandlePushTask(" in f.function]
    assert len(cpp) == 1
    assert cpp[0].function.endswith("::{lambda()#1}::operator()")
    assert (cpp[0].file, cpp[0].native) == ("ray/_raylet.so", True)


def test_pyspy_locals_are_attached_to_their_frame() -> None:
    proc = one("pyspy/threads-locals.txt")
    counter = thread(proc, "counter")
    frame = next(f for f in counter.frames if f.function == "count_then_wait")
    assert frame.line == 54
    assert frame.locals == {"limit": "1234", "label": '"epoch-7"', "counter": "1234", "_": "1233",
                            "batch": '{"counted": 1234, "label": "epoch-7"}'}
    assert thread(proc, "spinner").frames[0].locals == {"spins": "50772154"}
    assert thread(proc, "deadlock-left").frames[0].locals is None  # py-spy printed none
    wait = thread(proc, "MainThread").frames[0]
    assert wait.locals == {"self": "<Thread at 0x7faa16ebb710>", "block": "True",
                           "timeout": "0.2", "lock": "<_thread.lock at 0x7faa16ec0940>"}


def test_pyspy_subprocesses_sections() -> None:
    parent, child = parse_path(str(DATA / "pyspy" / "subprocesses.txt"))
    assert (parent.pid, parent.parent_pid, parent.role) == (5686, None, None)
    assert funcs(parent.threads[0])[:4] == ["Popen._try_wait", "Popen._wait", "Popen.wait",
                                            "wait_for_child"]
    assert (child.pid, child.parent_pid, child.role) == (5687, 5686, "child")
    assert child.title is not None and child.title.endswith("--child --lifetime 60.0")
    assert [t.name for t in child.threads] == ["MainThread", "child-heartbeat"]
    assert (child.threads[0].frames[0].function, child.threads[0].frames[0].line) == ("child_work", 20)


def test_pyspy_subprocesses_with_a_non_python_child() -> None:
    # py-spy prints the parent, a rule, then fails on the child (rc 1) with a Rust backtrace
    parent, child = parse_path(str(DATA / "pyspy" / "subprocesses-nonpython-child.txt"))
    assert (parent.pid, len(parent.threads)) == (15854, 1)
    assert parent.threads[0].frames[-1].function == "<module>"
    assert parent.threads[0].frames[-1].file == "<string>"
    assert (child.pid, child.parent_pid, child.role, child.threads) == (None, 15854, "child", [])
    assert child.error == "Error: Failed to find python version from target process"


def test_pyspy_tty_output_with_colours_and_crlf() -> None:
    proc = one("pyspy/threads-tty.txt")
    assert (proc.pid, proc.python) == (22663, "3.11.7")
    assert [t.name for t in proc.threads] == THREAD_NAMES[:6]
    assert (proc.threads[0].frames[0].function, proc.threads[0].frames[0].line) == (
        "Thread._wait_for_tstate_lock", 1139)


# -- py-spy JSON --------------------------------------------------------------------------------

def shape(th: Thread) -> list[tuple[str, int | None, bool]]:
    """Frames without native addresses; the spinner runs between two dumps, so its line moves."""
    return [(f.function, None if th.name == "spinner" else f.line, f.native)
            for f in th.frames if not f.function.startswith("0x")]


@pytest.mark.parametrize("variant", ["", "-native", "-locals"])
def test_pyspy_json_matches_the_text_dump_of_the_same_process(variant: str) -> None:
    text = one(f"pyspy/threads{variant}.txt")
    js = one(f"pyspy/threads{variant}.json")
    assert js.source == "py-spy-json" and js.pid == text.pid == 5671
    for name in THREAD_NAMES:
        t, j = thread(text, name), thread(js, name)
        assert shape(j) == shape(t)
        assert (j.active, j.owns_gil) == (t.active, t.owns_gil)
    if variant == "-locals":
        frame = next(f for f in thread(js, "counter").frames if f.function == "count_then_wait")
        assert frame.locals is not None and frame.locals["counter"] == "1234"
    json_file = next(f.file for f in thread(js, "MainThread").frames if not f.native)
    assert json_file.endswith("/lib/python3.11/threading.py")  # JSON keeps full paths


def test_pyspy_json_subprocesses_holds_the_parent_only() -> None:
    # py-spy 0.4.3 `--subprocesses --json` returns before visiting the children (README.md)
    proc = one("pyspy/subprocesses.json")
    assert proc.pid == 5686 and len(proc.threads) == 1


# -- older py-spy layouts -----------------------------------------------------------------------

def test_pyspy_0_1_layout() -> None:
    proc = one("pyspy-old/py-spy-0.1.11.txt")
    assert (proc.source, proc.pid, proc.python) == ("py-spy-text-0.1", None, "3.7.16")
    assert len(proc.threads) == 6
    first = proc.threads[0]
    assert (first.thread_id, first.os_thread_id, first.name, first.active) == (
        "0x7F8F42FFD6C0", None, None, True)
    assert funcs(first) == ["native_wait", "run", "_bootstrap_inner", "_bootstrap"]
    assert (first.frames[0].file, first.frames[0].line) == ("threads_target.py", 60)
    assert funcs(proc.threads[-1])[:3] == ["_wait_for_tstate_lock", "join", "wait_for_workers"]


def test_pyspy_0_2_locals_with_double_colons() -> None:
    proc = one("pyspy-old/py-spy-0.2.2-locals.txt")
    assert (proc.pid, proc.python, proc.source) == (5696, "3.7.16", "py-spy-text")
    assert proc.threads[0].thread_id == "0x7F8F49B38B80" and proc.threads[0].name == "MainThread"
    frame = next(f for f in thread(proc, "counter").frames if f.function == "count_then_wait")
    assert frame.locals == {"limit": "1234", "label": '"epoch-7"', "counter": "1234", "_": "1233",
                            "batch": '{"counted": 1234, "label": "epoch-7"}'}


@pytest.mark.parametrize("name", ["py-spy-0.2.2.txt", "py-spy-0.3.14.txt", "py-spy-0.3.14-locals.txt"])
def test_pyspy_0_2_and_0_3_layouts(name: str) -> None:
    proc = one(f"pyspy-old/{name}")
    assert (proc.pid, proc.python) == (5696, "3.7.16")
    assert [t.name for t in proc.threads] == THREAD_NAMES[:6]
    assert [t.os_thread_id for t in proc.threads] == [5696, 5699, 5700, 5701, 5702, 5703]
    assert funcs(thread(proc, "counter")) == ["wait", "wait", "count_then_wait", "run",
                                              "_bootstrap_inner", "_bootstrap"]


# -- faulthandler --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["later", "signal", "fatal"])
@pytest.mark.parametrize("tag,version", [("py311", "3.11"), ("py313", "3.13")])
def test_faulthandler_dumps(mode: str, tag: str, version: str) -> None:
    proc = one(f"faulthandler/{mode}-{tag}.txt")
    assert (proc.source, proc.pid, proc.title, proc.python) == ("faulthandler", None, None, version)
    assert len(proc.threads) == 6
    assert all(t.thread_id and t.thread_id.startswith("0x00007f") for t in proc.threads)
    native_wait = proc.threads[0]
    assert (native_wait.frames[0].function, native_wait.frames[0].line) == ("native_wait", 60)
    assert native_wait.frames[0].file.endswith("/targets/threads_target.py")
    assert [f.function for f in native_wait.frames[1:]] == ["run", "_bootstrap_inner", "_bootstrap"]
    main = proc.threads[-1]
    expected = {"later": ("block_main", 26), "signal": ("block_main", 26), "fatal": ("main", 45)}
    assert (main.frames[0].function, main.frames[0].line) == expected[mode]
    assert main.frames[-1].function == "<module>"


# -- ray stack, dashboard ------------------------------------------------------------------------

def test_ray_stack_sections_take_pid_and_title_from_the_ps_line() -> None:
    procs = parse_path(str(DATA / "ray-stack" / "ray_stack.txt"))
    assert len(procs) == 23
    assert all(p.source == "ray-stack" and p.python == "3.11.7" for p in procs)
    by_pid = {p.pid: p for p in procs}
    odd = by_pid[8532]
    assert odd.title == "ray::Rank.train_step"
    assert odd.title_parts == ("Rank", "train_step")
    python_frames = [f.function for f in odd.threads[0].frames if not f.native]
    assert python_frames[:2] == ["Rank.load_shard",
                                 "_inject_tracing_into_class.<locals>.span_wrapper.<locals>._resume_span"]
    assert odd.threads[0].frames[0].function == "clock_nanosleep"  # --native: libc first
    assert by_pid[2712].title == "ray::IDLE" and by_pid[2712].title_parts == (None, None)
    assert by_pid[8748].title_parts == ("prefetch", None)  # a task
    threaded = by_pid[8681]
    assert [t.name for t in threaded.threads] == ["MainThread", "PythonGCThread", None, None]


def test_ray_stack_keeps_pyspy_errors_per_process() -> None:
    procs = parse_path(str(DATA / "ray-stack" / "ray_stack_with_error.txt"))
    by_pid = {p.pid: p for p in procs}
    broken = by_pid[12526]
    assert broken.title == "ray::NotPython 300"
    assert broken.error == "Error: Failed to find python version from target process"
    assert broken.threads == []
    failed = sorted(p.pid for p in procs if p.error)
    assert failed == [10574, 10576, 12526]
    assert all(p.threads for p in procs if not p.error)


def test_dashboard_stack_view_is_pyspy_text() -> None:
    driver = one("dashboard/driver_traceback.txt")
    assert driver.pid == 21227
    assert [t.name for t in driver.threads] == ["MainThread", "PythonGCThread",
                                                "ray_listen_error_messages", "ray_print_logs"]
    idle = one("dashboard/idle_worker_traceback_native.txt")
    assert idle.title == "ray::IDLE"
    assert [f.function for f in idle.threads[0].frames if not f.native] == [
        "Worker.main_loop", "<module>"]


# -- folders, mixtures, stacks/v1 --------------------------------------------------------------

def test_collection_folder_prefers_its_stacks_json() -> None:
    warnings: list[str] = []
    procs = parse_path(str(DATA / "collect-dir"), warnings)
    assert len(procs) == 14
    assert {p.source for p in procs} == {"py-spy-json"}
    assert sorted(p.pid for p in procs if p.title == "ray::Rank.train_step") == [8441, 8532, 8533, 8560]
    assert any("ignored the 14 other file(s)" in w for w in warnings)


def test_folder_without_stacks_json_reads_every_file_and_numbers_samples() -> None:
    procs = parse_path(str(DATA / "ray"))
    rank = sorted((p.sample, p.source) for p in procs if p.pid == 8441)
    # .json, -locals.txt, -native.txt, .txt of one process: four samples of pid 8441
    assert [s for s, _ in rank] == [0, 1, 2, 3]
    assert sorted(src for _, src in rank) == ["py-spy-json", "py-spy-text", "py-spy-text",
                                              "py-spy-text"]


def test_many_dumps_back_to_back_in_mixed_formats() -> None:
    procs = parse_path(str(DATA / "mixed" / "concat.txt"))
    assert [(p.source, p.pid) for p in procs] == [
        ("py-spy-text", 5671), ("faulthandler", None), ("py-spy-json", 8532),
        ("py-spy-text-0.1", None), ("py-spy-text", 8417), ("py-spy-text", 5686),
        ("py-spy-text", 5687), ("faulthandler", None)]
    assert [len(p.threads) for p in procs] == [7, 6, 2, 6, 3, 1, 2, 6]
    assert procs[7].python == "3.13"
    assert procs[2].threads[1].frames[0].function == "Rank.load_shard"


def test_stacks_v1_round_trip_through_json() -> None:
    procs = parse_path(str(DATA / "mixed" / "concat.txt"))
    doc = stacks_to_dict(procs, {"input": "concat.txt"})
    again = parse_text(json.dumps(doc))
    assert stacks_to_dict(again, {"input": "concat.txt"}) == doc
    assert stacks_from_dict(json.loads(json.dumps(doc)))[2].threads[1].frames[0].line == 40


def test_split_frame_and_python_file() -> None:
    assert split_frame("Worker.get_objects (ray/_private/worker.py:1007)") == (
        "Worker.get_objects", "ray/_private/worker.py", 1007)
    assert split_frame("0x7faa172a3f16 (libc.so.6)") == ("0x7faa172a3f16", "libc.so.6", None)
    assert split_frame("f (<frozen importlib._bootstrap>:1178)") == (
        "f", "<frozen importlib._bootstrap>", 1178)
    assert is_python_file("<frozen importlib._bootstrap>") and is_python_file("x.pyx")
    assert not is_python_file("callproc.c") and not is_python_file("ray/_raylet.so")
    assert split_ray_title("ray::Rank.train_step") == ("Rank", "train_step")


# -- damaged input -------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [b"", b"   \n\n\t\n"])
def test_empty_input_is_bad_input(data: bytes) -> None:
    with pytest.raises(BadInputError, match="empty"):
        parse_bytes(data, "paste")


def test_binary_input_is_bad_input() -> None:
    with open(sys.executable, "rb") as fh:
        data = fh.read(65536)
    with pytest.raises(BadInputError, match="binary"):
        parse_bytes(data, "python")


def test_text_without_any_dump_is_bad_input() -> None:
    readme = (DATA / "README.md").read_bytes()
    with pytest.raises(BadInputError, match="no stack dump recognised"):
        parse_bytes(readme, "README.md")


def test_non_utf8_bytes_are_replaced_with_a_warning() -> None:
    data = (DATA / "pyspy" / "threads-locals.txt").read_bytes().replace(b'"epoch-7"', b'"\xe9poch-7"')
    warnings: list[str] = []
    proc = parse_bytes(data, "latin1", warnings)[0]
    frame = next(f for f in thread(proc, "counter").frames if f.function == "count_then_wait")
    assert frame.locals is not None and frame.locals["label"] == '"\ufffdpoch-7"'
    assert any("not valid UTF-8" in w for w in warnings)


def test_utf16_with_bom_as_windows_shells_write_it() -> None:
    text = (DATA / "pyspy" / "threads.txt").read_text()
    proc = parse_bytes(text.encode("utf-16"), "utf16")[0]
    assert proc.pid == 5671 and len(proc.threads) == 7


def test_text_dump_cut_mid_frame_is_parsed_as_far_as_it_goes() -> None:
    text = (DATA / "ray" / "Rank.train_step-8441.txt").read_text()
    cut = text[: text.index("Rank.all_reduce") + 6]  # "    Queue.get (...)\n    Rank.a"
    warnings: list[str] = []
    proc = parse_text(cut, warnings)[0]
    assert funcs(proc.threads[0])[-1] == "Queue.get"
    assert any("cut short" in w for w in warnings)


def test_json_dump_cut_short_keeps_the_complete_threads() -> None:
    text = (DATA / "pyspy" / "threads.json").read_text()
    cut = text[: text.index('"thread_name": "sleeper"')]
    warnings: list[str] = []
    proc = parse_text(cut, warnings)[0]
    assert [t.name for t in proc.threads] == ["spinner", "native-wait", "counter"] or \
        len(proc.threads) >= 1
    assert any("JSON cut short" in w for w in warnings)


def test_stacks_v1_cut_short_keeps_the_complete_processes() -> None:
    text = (DATA / "collect-dir" / "stacks.json").read_text()
    cut = text[: text.index('"pid": 8532')]
    warnings: list[str] = []
    procs = parse_text(cut, warnings)
    assert 1 <= len(procs) < 14 and procs[0].pid == 8417
    assert any("JSON cut short" in w and "process" in w for w in warnings)


def test_header_without_threads_warns() -> None:
    text = (DATA / "pyspy" / "threads.txt").read_text().split("Thread ")[0]
    warnings: list[str] = []
    procs = parse_text(text, warnings)
    assert procs[0].pid == 5671 and procs[0].threads == []
    assert any("no thread" in w for w in warnings)


# -- property-based: mutations of real dumps never crash the parser -------------------------------

SAMPLES = [
    DATA / "pyspy" / "threads-locals.txt",
    DATA / "pyspy" / "threads-native.txt",
    DATA / "pyspy" / "threads.json",
    DATA / "pyspy" / "subprocesses.txt",
    DATA / "pyspy-old" / "py-spy-0.1.11.txt",
    DATA / "pyspy-old" / "py-spy-0.2.2-locals.txt",
    DATA / "faulthandler" / "fatal-py311.txt",
    DATA / "ray" / "Rank.train_step-8441.json",
    DATA / "ray" / "Threaded.backward-8681.txt",
    DATA / "mixed" / "concat.txt",
    DATA / "pyspy" / "threads-tty.txt",
]
SAMPLE_BYTES = [p.read_bytes() for p in SAMPLES] + [
    (DATA / "collect-dir" / "stacks.json").read_bytes()[:60000],
    (DATA / "ray-stack" / "ray_stack_with_error.txt").read_bytes()[:40000],
]


def assert_well_formed(procs: list[Process]) -> None:
    assert procs, "parse_* returns at least one process or raises"
    for p in procs:
        assert isinstance(p, Process)
        assert p.pid is None or isinstance(p.pid, int)
        assert p.title is None or isinstance(p.title, str)
        assert isinstance(p.threads, list)
        for t in p.threads:
            assert isinstance(t, Thread)
            assert t.active in (None, True, False)
            for f in t.frames:
                assert isinstance(f, Frame)
                assert isinstance(f.function, str) and isinstance(f.file, str)
                assert f.line is None or isinstance(f.line, int)
                assert isinstance(f.native, bool)
                assert f.locals is None or all(
                    isinstance(k, str) and isinstance(v, str) for k, v in f.locals.items())
        json.dumps(stacks_to_dict([p]))


def parse_or_bad_input(data: bytes) -> None:
    try:
        procs = parse_bytes(data, "mutant")
    except BadInputError as exc:
        assert "\n" not in str(exc)
        return
    assert_well_formed(procs)
    # whatever parses also aggregates: every thread lands in exactly one group
    agg = aggregate(procs, AggregateOptions(lines=True, show_housekeeping=True, native=True))
    assert sum(g.size for g in agg.groups) == sum(len(p.threads) for p in procs)
    json.dumps(agg.to_dict())


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SAMPLE_BYTES)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["truncate", "drop", "dup", "flip", "insert"]))
        lines = bytes(data).split(b"\n")
        if op == "truncate":
            data = data[: draw(st.integers(0, len(data)))]
        elif op == "drop" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            data = bytearray(b"\n".join(lines[:i] + lines[i + draw(st.integers(1, 5)):]))
        elif op == "dup" and lines:
            i = draw(st.integers(0, len(lines) - 1))
            data = bytearray(b"\n".join(lines[:i] + [lines[i]] * draw(st.integers(2, 4)) + lines[i + 1:]))
        elif op == "flip" and data:
            for _ in range(draw(st.integers(1, 8))):
                i = draw(st.integers(0, len(data) - 1))
                data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=40))
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_real_dumps_parse_or_fail_cleanly(data: bytes) -> None:
    parse_or_bad_input(data)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SAMPLE_BYTES), st.data())
def test_any_prefix_of_a_real_dump_parses_or_fails_cleanly(data: bytes, draw: st.DataObject) -> None:
    cut = draw.draw(st.integers(0, len(data)))
    parse_or_bad_input(data[:cut])


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=2000))
def test_random_bytes_never_crash(data: bytes) -> None:
    parse_or_bad_input(data)


def test_run_on_each_ray_node_dump_text_reads_like_its_json() -> None:
    # GIVEN the text and the --json output of `run_on_each_ray_node.py --dump PIDS --samples 2` on a
    # hung gloo job's node (a node is dumped once; the same file is then classified)
    text_warnings: list[str] = []
    from_text = parse_path(str(DATA / "node-dump" / "dump.txt"), text_warnings)
    from_json = parse_path(str(DATA / "node-dump" / "dump.json"), [])
    # THEN nothing is skipped, every process carries its node, and both give the same stacks
    assert text_warnings == []
    nodes = {p.node_id for p in from_text}
    assert len(nodes) == 1 and next(iter(nodes)).startswith("b41d591f78ad")
    assert nodes == {p.node_id for p in from_json}

    def stacks(procs: list[Process]) -> list[tuple[object, ...]]:
        return sorted((p.pid, p.sample, tuple((t.name, tuple((f.function, f.line) for f in t.frames))
                                              for t in p.threads)) for p in procs)

    assert stacks(from_text) == stacks(from_json)
    assert sorted({p.sample for p in from_text}) == [0, 1]


def test_run_on_each_ray_node_dump_error_line_becomes_a_process_error() -> None:
    warnings: list[str] = []
    procs = parse_path(str(DATA / "node-dump" / "dump-with-error.txt"), warnings)
    assert warnings == []
    dumped, failed = sorted(procs, key=lambda p: p.error is not None)
    assert dumped.threads and dumped.threads[0].frames[0].function == "<module>"
    assert failed.pid == dumped.pid + 1 and not failed.threads
    assert failed.error and failed.error.startswith("[process-exited] process not found on this node")
    assert dumped.node_id == failed.node_id and dumped.node_id and dumped.node_id.startswith("b05a8354")
