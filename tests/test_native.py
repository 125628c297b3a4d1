"""Below Python, on real captures (tests/data/native/README.md says how each was recorded): gdb,
pstack, eu-stack, lldb and py-spy --native read into native frames, gdb's py-bt merged in,
innermost-first Python dialects, sys._current_frames() recipes, torchrun logs; the catalog's
native patterns at the right frame, the GIL's holder named, a lock no thread can release; the
NCCL watchdog's and desync report's per-rank facts (lines built from PyTorch's format strings:
NCCL cannot run here). Plus hypothesis: the new readers never raise on damaged real captures."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from debug_hang.analyse.collectives import progress_findings
from debug_hang.analyse.patterns import match_process
from debug_hang.commands.match import classify
from debug_hang.errors import BadInputError
from debug_hang.model import Process, Thread
from debug_hang.parse.native import gdb_frame, lldb_frame, split_call
from debug_hang.parse.parsers import parse_path, parse_text
from debug_hang.parse.recipes import parse_header

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from native_scoreboard import check, recorded_inputs  # noqa: E402  (tools/native_scoreboard.py)

pytestmark = pytest.mark.unit
NATIVE = ROOT / "tests" / "data" / "native"


def one(rel: str) -> Process:
    procs = [p for p in parse_path(str(NATIVE / rel)) if p.threads]
    assert len(procs) == 1, [(p.source, p.pid) for p in procs]
    return procs[0]


def functions(thread: Thread) -> list[str]:
    return [f.function for f in thread.frames]


def by_frame(proc: Process, function: str) -> list[Thread]:
    return [t for t in proc.threads if any(f.function == function for f in t.frames)]


# -- every recorded input parses; every label without a recorded miss is met -----------------

@pytest.mark.parametrize("rel", recorded_inputs())
def test_every_recorded_native_input_parses(rel: str) -> None:
    procs = parse_path(str(NATIVE / rel))  # never BadInputError (exit 3) on a real dump
    assert procs


def test_every_label_of_the_scoreboard_is_met_or_a_recorded_miss() -> None:
    results = check()
    unexpected = [(o.file, o.select, o.got) for r in results for o in r.outcomes if not o.hit and not o.miss]
    assert not unexpected
    # a recorded miss that is met now must lose its `miss` (the scoreboard would flatter otherwise)
    stale = [(o.file, o.select) for r in results for o in r.outcomes if o.hit and o.miss]
    assert not stale
    assert sum(o.hit for r in results for o in r.outcomes) >= 113


# -- gdb ------------------------------------------------------------------------------------

def test_gdb_thread_apply_all_bt_threads_frames_and_pid() -> None:
    proc = one("cpp/gdb-all-bt.txt")
    assert proc.source == "gdb" and proc.pid == 27856
    assert [t.os_thread_id for t in proc.threads] == [27859, 27858, 27857, 27856]
    assert all(t.name == "cpp_deadlock" for t in proc.threads)
    assert all(f.native for t in proc.threads for f in t.frames)
    worker = proc.threads[1]
    assert functions(worker)[:8] == ["futex_wait", "__GI___lll_lock_wait", "lll_mutex_lock_optimized",
                                     "___pthread_mutex_lock", "__gthread_mutex_lock", "std::mutex::lock",
                                     "std::lock_guard<std::mutex>::lock_guard",
                                     "(anonymous namespace)::Rebalancer<long>::move_one"]
    move = worker.frames[7]
    assert (move.file, move.line) == ("/work/wt/native/tests/data/native/targets/cpp_deadlock.cpp", 35)
    assert worker.frames[3].locals == {"mutex": "0x7ffc11862640"}  # the address gdb's `p *mutex` needs
    assert worker.frames[-3].function == "??" and worker.frames[-3].file == "/lib/x86_64-linux-gnu/libstdc++.so.6"


def test_gdb_cpp_names_keep_their_own_parentheses() -> None:
    waiter = one("cpp/gdb-all-bt.txt").threads[0]
    assert functions(waiter)[5] == ("std::condition_variable::wait<(anonymous namespace)::Completion::wait()::"
                                    "<lambda()> >(std::unique_lock<std::mutex> &, struct {...})")
    assert waiter.frames[5].locals == {"this": "0x7ffc11862598", "__lock": "...", "__p": "..."}


def test_gdb_frame_syntax() -> None:
    f = gdb_frame("0x00007f0eef485156 in registry_flush () at /x/teardown_lock.c:16")
    assert (f.function, f.file, f.line, f.native) == ("registry_flush", "/x/teardown_lock.c", 16, True)
    f = gdb_frame("0x00007eff0bc5ff7a in ?? () from /lib/x86_64-linux-gnu/libffi.so.8")
    assert (f.function, f.file, f.line) == ("??", "/lib/x86_64-linux-gnu/libffi.so.8", None)
    f = gdb_frame("_ctypes_callproc (argtuple=argtuple@entry=(<c_char_Array_40 at remote 0x7eff>,), "
                  "flags=<optimized out>) at ./Modules/_ctypes/callproc.c:1262")
    assert f.function == "_ctypes_callproc" and f.line == 1262
    assert split_call("std::thread::join()", spaced=False) == ("std::thread::join()", None)
    assert split_call("std::mutex::lock(this=0x1)", spaced=False) == ("std::mutex::lock", "this=0x1")
    f = lldb_frame("libc.so.6`___pthread_mutex_lock(mutex=0x00007f) at pthread_mutex_lock.c:93:7")
    assert (f.function, f.file, f.line) == ("___pthread_mutex_lock", "pthread_mutex_lock.c", 93)
    assert lldb_frame("libffi.so.8`ffi_call + 205").function == "ffi_call"


def test_gdb_bt_without_thread_headers_is_one_thread_of_the_process() -> None:
    proc = one("mutex/gdb-bt.txt")
    assert proc.pid == 23354 and len(proc.threads) == 1  # the pid from `[Inferior 1 (process N) detached]`
    assert functions(proc.threads[0])[6] == "PyThread_acquire_lock_timed"


def test_a_typed_gdb_session_and_pstack_read_like_the_batch_output() -> None:
    batch = one("cpp/gdb-all-bt.txt")
    for rel in ("cpp/gdb-session.txt", "cpp/pstack.txt"):
        proc = one(rel)
        assert [functions(t) for t in proc.threads] == [functions(t) for t in batch.threads], rel


def test_py_bt_is_innermost_first_with_the_gil_wait_and_c_calls() -> None:
    proc = one("gil/gdb-py-bt.txt")
    ticker = next(t for t in proc.threads if any(f.function == "ticker" for f in t.frames))
    assert functions(ticker) == ["Waiting for the GIL", "sleep", "ticker", "run", "_bootstrap_inner", "_bootstrap"]
    assert [f.native for f in ticker.frames] == [True, True, False, False, False, False]
    assert ticker.frames[2].code == "time.sleep(0.1)"


def test_py_bt_merges_into_the_native_threads_at_the_eval_loop() -> None:
    text = (NATIVE / "mutex/gdb-all-bt.txt").read_text() + (NATIVE / "mutex/gdb-py-bt.txt").read_text()
    procs = [p for p in parse_text(text) if p.threads]
    assert len(procs) == 1 and len(procs[0].threads) == 4
    left = by_frame(procs[0], "left")[0]
    names = functions(left)
    assert names[:4] == ["futex_wait", "__GI___lll_lock_wait", "lll_mutex_lock_optimized", "___pthread_mutex_lock"]
    at = names.index("lock")
    assert names[at - 1] == "_PyObject_MakeTpCall" and names[at + 1] == "left"  # where the eval loop was
    assert names[at + 5] == "_PyEval_EvalFrameDefault"


def test_eu_stack_and_its_verbose_form() -> None:
    proc = one("cpp/eu-stack.txt")
    assert proc.source == "eu-stack" and proc.pid == 27856 and len(proc.threads) == 4
    assert "std::mutex::lock()" in functions(proc.threads[1])
    verbose = one("cpp/eu-stack-v.txt")
    frame = verbose.threads[0].frames[0]
    assert (frame.function, frame.file) == ("__futex_abstimed_wait_common64", "/usr/lib/x86_64-linux-gnu/libc.so.6")
    assert frame.code == "./nptl/futex-internal.c:57"  # the source line eu-stack -v prints under it


def test_lldb_keeps_the_full_listing_of_a_thread_listed_twice() -> None:
    proc = next(p for p in parse_path(str(NATIVE / "cpp/lldb.txt")) if p.source == "lldb")
    assert proc.pid == 27856 and len(proc.threads) == 4
    assert [len(t.frames) for t in proc.threads] == [8, 17, 16, 18]  # not the one-frame attach summary
    assert "std::mutex::lock" in functions(proc.threads[1])


# -- the catalog's native readings ------------------------------------------------------------

def test_a_gil_deadlock_names_the_holder_and_where_it_blocks() -> None:
    for rel, frame in (("gil/gdb-all-bt.txt", "___pthread_mutex_lock"), ("gil/py-spy-native.txt", "pthread_mutex_lock"),
                       ("gil/eu-stack.txt", "__pthread_mutex_lock@GLIBC_2.2.5")):
        verdict = match_process(one(rel))
        assert verdict.verdict == "blocked" and verdict.pattern == "gil-holder-blocked", rel
        assert verdict.main is not None and verdict.main.frame is not None and verdict.main.frame.function == frame
        assert "native-lock-wait" in verdict.main.also
        waiters = [m for _, m in verdict.threads if m.pattern == "gil-wait"]
        assert len(waiters) == 3 and all(m.waits_for and "25620" in m.waits_for for m in waiters), rel


def test_py_spy_json_marks_the_holder_without_native_frames() -> None:
    verdict = match_process(one("gil-sleep/py-spy-json.txt"))
    assert verdict.pattern == "gil-holder-blocked"
    assert verdict.main is not None and verdict.main.frame is not None
    assert verdict.main.frame.function == "mode_sleep.<locals>.blocking_call"


def test_no_holder_is_invented_without_evidence() -> None:
    # every recorded py-spy JSON of healthy and hung jobs: no thread owns the GIL while idle
    for path in sorted((ROOT / "tests" / "data" / "dumps").rglob("*.json")):
        try:
            procs = parse_path(str(path))
        except BadInputError:  # a MANIFEST.json beside the dumps
            continue
        for proc in procs:
            assert match_process(proc).pattern != "gil-holder-blocked", path


def test_a_dlopen_that_never_returns_under_the_gil() -> None:
    verdict = match_process(one("gil-dlopen/gdb-all-bt.txt"))
    assert verdict.pattern == "gil-holder-blocked"
    assert verdict.main is not None and verdict.main.frame is not None and verdict.main.frame.function == "___dlopen"


def test_one_thread_waiting_for_a_native_lock_is_a_lock_nobody_can_release() -> None:
    for rel in ("fork-mutex/gdb-all-bt.txt", "fork-exit/gdb-all-bt.txt", "fork-exit/pstack.txt", "fork-exit/eu-stack.txt"):
        verdict = match_process(one(rel))
        assert verdict.pattern == "fork-inherited-lock", rel
    exit_stack = functions(one("fork-exit/gdb-all-bt.txt").threads[0])
    assert exit_stack.index("registry_flush") < exit_stack.index("__run_exit_handlers")
    # the same wait in a process with other threads is a lock held by one of them
    assert match_process(one("cpp/gdb-all-bt.txt")).threads[1][1].pattern == "native-lock-wait"
    # a bare `bt` shows one thread of a process that may have more: no such certainty
    assert match_process(one("fork-mutex/gdb-bt.txt")).pattern == "native-lock-wait"


def test_cpp_waits_are_decided_at_the_api_called() -> None:
    verdict = match_process(one("cpp/gdb-all-bt.txt"))
    decided = [(m.pattern, m.frame.function if m.frame else None) for _, m in verdict.threads]
    assert decided[1:3] == [("native-lock-wait", "std::mutex::lock")] * 2
    assert decided[0][0] == "native-condition-wait" and decided[0][1].startswith("std::condition_variable::wait<")
    assert decided[3] == ("unknown", None)  # main in std::thread::join
    assert verdict.main is not None and verdict.main.user_frame is not None
    absl = match_process(one("absl/gdb-all-bt.txt"))
    assert [m.frame.function for _, m in absl.threads if m.frame] == [
        "absl::debian3::Mutex::Lock()", "absl::debian3::Mutex::Lock()",
        "absl::debian3::Notification::WaitForNotification() const"]


def test_runtime_threads_of_a_python_process_do_not_decide_it() -> None:
    # ray stack's --native dumps of idle Ray workers: their C++ threads wait on condition variables
    for proc in parse_path(str(ROOT / "tests/data/formats/ray-stack/ray_stack.txt")):
        if proc.pid in (2780, 8442, 8680):
            assert match_process(proc).verdict == "unknown"


def test_python_locks_in_native_frames_only_under_the_jobs_own_code() -> None:
    proc = one("cond/py-spy-native.txt")
    assert match_process(proc).threads[0][1].pattern == "unknown"  # Thread.join: library code above it
    for _t, m in match_process(one("fork-pylock/py-spy-native.txt")).threads:
        assert m.pattern == "lock-wait" and m.frame is not None and m.frame.function == "PyThread_acquire_lock_timed"


def test_gpu_sync_is_read_wherever_torch_defines_synchronize() -> None:
    for file in ("torch/cuda/__init__.py", "torch/cuda/streams.py"):
        text = f'Thread 1 (idle): "MainThread"\n    synchronize ({file}:1)\n    step (train.py:9)\n'
        assert match_process(parse_text(text)[0]).pattern == "gpu-sync-wait", file


# -- Python dialects ----------------------------------------------------------------------------

@pytest.mark.parametrize("recipe", ["hash-thread", "format-list", "dashes", "hex-ids", "logging"])
def test_current_frames_recipes_read_innermost_first(recipe: str) -> None:
    proc = one(f"dialects/{recipe}.txt")
    assert proc.source == "thread-dump" and len(proc.threads) == 5
    waiter = by_frame(proc, "wait_for_flag")[0]
    assert functions(waiter) == ["wait", "wait", "wait_for_flag", "run", "_bootstrap_inner", "_bootstrap"]
    assert waiter.frames[0].code == "waiter.acquire()"
    assert waiter.thread_id is not None
    if recipe != "dashes":
        assert {t.name for t in proc.threads} == {"waiter", "consumer", "left", "right", "MainThread"}


def test_headerless_frames_are_ordered_by_their_content() -> None:
    stack = one("dialects/print-stack.txt").threads[0]  # traceback.print_stack(): outermost first
    assert functions(stack)[0] == "dump" and functions(stack)[-1] == "<module>"
    column0 = one("reshaped/faulthandler-column0.txt")
    assert [functions(t)[0] for t in column0.threads] == ["wait", "wait", "right", "left", "dump"]
    alone = one("reshaped/faulthandler-no-header.txt").threads[0]
    assert functions(alone) == ["wait", "wait", "wait_for_flag", "run", "_bootstrap_inner", "_bootstrap"]


def test_innermost_first_traceback_header_is_not_reversed() -> None:
    blocks = [p for p in parse_path(str(NATIVE / "reshaped/gdb-py-bt-blocks.txt")) if p.threads]
    assert [functions(p.threads[0])[0] for p in blocks] == ["c_extension", "Waiting for the GIL",
                                                            "Waiting for the GIL", "Waiting for the GIL"]


def test_poster_notes_and_aligned_columns() -> None:
    aligned = one("reshaped/pyspy-aligned.txt")
    assert [t.name for t in aligned.threads] == ["MainThread", "left", "right", "relock"]
    assert [(f.function, f.file, f.line) for f in aligned.threads[1].frames[:2]] == [
        ("lock", "native_locks.py", 42), ("mode_mutex.<locals>.left", "native_locks.py", 58)]
    noted = one("reshaped/pyspy-paren-note.txt")
    assert noted.threads[0].frames[2].file == "native_locks.py" and noted.threads[0].frames[2].line == 75
    annotated = one("reshaped/pyspy-annotated.txt")
    assert annotated.threads[0].frames[3].function == "mode_gil"


def test_recipe_header_forms() -> None:
    assert parse_header("# Thread: worker-1(140123)") == ("worker-1", "140123")
    assert parse_header("thread <_MainThread(MainThread, started 1407)>:") == ("MainThread", "1407")
    assert parse_header("-- Thread ID: 140063068968640 ---") == (None, "140063068968640")
    assert parse_header("Thread 0x7f7b5d2fd6c0 (waiter):") == ("waiter", "0x7f7b5d2fd6c0")
    for text in ("MainThread:", "Starting thread pool (4 workers):", "Exception in thread Thread-1:"):
        assert parse_header(text) is None, text


# -- torchrun logs and collective facts -------------------------------------------------------

def test_torchrun_doubled_prefixes_read_per_rank() -> None:
    procs = parse_path(str(NATIVE / "torch/skip-tee.log"))
    rank0 = [p for p in procs if p.rank == 0]
    assert {p.source for p in rank0} == {"faulthandler", "traceback"}
    fh = next(p for p in rank0 if p.source == "faulthandler")
    assert functions(fh.threads[0])[:3] == ["all_reduce", "wrapper", "train_step"]


def test_monitored_barrier_names_the_rank_that_never_came() -> None:
    verdicts, reasons = classify(parse_path(str(NATIVE / "torch/monitored.log")))
    by_rank = {v.process.rank: v for v in verdicts if v.process.rank is not None}
    assert by_rank[1].pattern == "collective-skipped" and "monitored_barrier" in reasons[1]
    assert by_rank[0].pattern == "collective-wait" and "rank(s) 1" in reasons[0]


def test_a_mismatch_wrapped_across_prefixed_lines_still_names_both_ranks() -> None:
    verdicts, _ = classify(parse_path(str(NATIVE / "reshaped/mismatch-wrapped.log")))
    assert {v.process.rank: v.pattern for v in verdicts if v.process.rank is not None} == {
        0: "collective-mismatch", 1: "collective-mismatch"}


# The NCCL lines below are built from PyTorch's format strings (NCCL needs a GPU, absent here):
# torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (WorkNCCL's operator<<; checkTimeout's "[Rank R]
# Watchdog caught collective operation timeout: <work> ran for N milliseconds before timing out.";
# the watchdog's "<logPrefix> failure detected by watchdog at work sequence id: S PG status: last
# enqueued work: E, last completed work: C"; HeartbeatMonitor's getNCCLWatchdogTimeoutErrorMsg and
# "ProcessGroupNCCL's watchdog got stuck for N seconds") and TraceUtils.h (retrieveDesyncReport).
# The glog prefix is the one torch's C++ logging writes under torchrun (seen for real in
# tests/data/native/torch/monitored.log).
def _work(seq: int, op: str = "ALLREDUCE") -> str:
    return f"WorkNCCL(SeqNum={seq}, OpType={op}, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000)"


def _prefix(rank: int) -> str:
    return f"[rank{rank}]:[E1201 09:27:01.012643992 ProcessGroupNCCL.cpp:632] "


def nccl_timeouts(ranks: list[int], seq: int, enqueued: dict[int, int]) -> str:
    lines = []
    for r in ranks:
        lines.append(f"{_prefix(r)}[Rank {r}] Watchdog caught collective operation timeout: {_work(seq)} "
                     "ran for 600017 milliseconds before timing out.")
        lines.append(f"{_prefix(r)}[PG ID 0 PG GUID 0(default_pg) Rank {r}]  failure detected by watchdog at work "
                     f"sequence id: {seq} PG status: last enqueued work: {enqueued.get(r, seq)}, "
                     f"last completed work: {seq - 1}")
    return "\n".join(lines) + "\n"


def test_the_rank_whose_sequence_lags_is_the_culprit() -> None:
    text = nccl_timeouts([0, 1, 2], 4812, {}) + (
        f"{_prefix(3)}[PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout "
        "from  rank 0 and we will try our best to dump the debug info. Last enqueued NCCL work: 4811, last "
        "completed NCCL work: 4811.This is most likely caused by incorrect usages of collectives\n")
    procs = parse_text(text)
    assert {p.rank: p.collective.get("last_enqueued") for p in procs if p.collective} == {0: 4812, 1: 4812, 2: 4812, 3: 4811}
    found = progress_findings(procs)
    assert found[3][0] == "collective-skipped" and "#4811" in found[3][1]
    assert {r: pattern for r, (pattern, _) in found.items() if r != 3} == {0: "collective-wait", 1: "collective-wait",
                                                                          2: "collective-wait"}


def test_the_rank_that_never_reports_is_the_culprit() -> None:
    procs = parse_text(nccl_timeouts([0, 1, 2, 4, 5, 6, 7], 9, {}))
    found = progress_findings(procs)
    assert found[3][0] == "collective-skipped" and "reports no watchdog timeout" in found[3][1]
    assert all(found[r][0] == "collective-wait" for r in (0, 1, 2, 4, 5, 6, 7))
    verdicts, _ = classify(procs)
    assert any(v.process.rank == 3 and v.pattern == "collective-skipped" for v in verdicts)
    # a log of two ranks says nothing about the ranks it does not show
    assert not [r for r, (p, _) in progress_findings(parse_text(nccl_timeouts([0, 5], 9, {}))).items()
                if p == "collective-skipped"]


def test_the_desync_report_names_the_lagging_ranks() -> None:
    report = (f"{_prefix(0)}[Rank 0] Watchdog caught collective operation timeout: {_work(27)} ran for 1800000 "
              "milliseconds before timing out.\n\t - [0] Timeout at collective: ALLREDUCE, #27\n"
              "\t - To our best knowledge, the lagging/dead/mismatched ranks that caused the desync are:\n"
              "\t   - [2] joined but didn't finish collective #26 (count from 1)\n"
              "\t     [3] finished collective #26, but didn't join collective #27 (count from 1)\n")
    found = progress_findings(parse_text(report))
    assert found[2][0] == found[3][0] == "collective-skipped"
    assert found[0] == ("collective-wait", "timed out in collective #27 (ALLREDUCE), waiting for rank(s) 2, 3")
    missing = parse_text("\t - To our best knowledge, ranks [1, 5] are the lagging ranks that caused this timeout. "
                         "They never joined any collectives\n")
    assert set(progress_findings(missing)) == {1, 5}


def test_a_stuck_watchdog_is_a_per_rank_fact() -> None:
    line = (f"{_prefix(2)}[PG ID 0 PG GUID 0(default_pg) Rank 2] ProcessGroupNCCL's watchdog got stuck for 480 "
            "seconds without making progress in monitoring enqueued collectives. This typically indicates a "
            "NCCL/CUDA API (e.g., CudaEventDestroy) hang blocking the watchdog\n")
    proc = parse_text(line)[0]
    assert proc.rank == 2 and proc.collective is not None and proc.collective["watchdog_stuck_s"] == 480


# -- hypothesis: the new readers never raise on damaged real captures --------------------------

NATIVE_INPUTS = [NATIVE / rel for rel in recorded_inputs()]


@st.composite
def damaged(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(NATIVE_INPUTS)).read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    rnd = random.Random(draw(st.integers(min_value=0, max_value=2**32)))
    for _ in range(draw(st.integers(min_value=1, max_value=12))):
        if not lines:
            break
        i = rnd.randrange(len(lines))
        op = rnd.choice(("cut", "drop", "dup", "swap", "noise", "indent"))
        if op == "cut":
            lines[i] = lines[i][: rnd.randrange(len(lines[i]) + 1)]
        elif op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = rnd.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "noise":
            lines[i] = lines[i] + rnd.choice(("(", ")", " at ", " from ", "`", "#0  ", '"', "<-", "\t"))
        else:
            lines[i] = rnd.choice(("", " ", "    ", "\t")) + lines[i].lstrip()
    return "\n".join(lines)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_native_captures_parse_and_match_or_fail_cleanly(text: str) -> None:
    try:
        procs = parse_text(text)
    except BadInputError:
        return
    json.dumps([p.collective for p in procs])
    classify(procs)


def test_the_report_shows_a_culprits_native_frames_and_who_waits_for_its_gil() -> None:
    from debug_hang.analyse.graph import proc_key
    from debug_hang.report.markdown import native_lines

    proc = one("gil/py-spy-native.txt")
    lines = list(native_lines([match_process(proc)], proc_key(proc)))
    text = "\n".join(lines)
    assert "native frames of thread c-extension (innermost first):" in text
    assert "pthread_mutex_lock (libc.so.6)" in text and "ffi_call (libffi.so.8.1.2)" in text
    assert "3 other thread(s) wait for the GIL, held by thread 25620 (c-extension): MainThread, holder, ticker" in text
