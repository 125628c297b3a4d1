"""What runs on a node, tested on real local processes with the real py-spy (no Ray cluster).

Every failure a node can report is produced for real: a pid that exited, a process that is not
Python, py-spy absent from a real Python environment, py-spy without ptrace rights (the real
py-spy run as `nobody` through setpriv: the only wrapper here), a command that overruns.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from debug_hang.errors import UsageError
from debug_hang.probe.commands import (
    COMMAND_NOT_FOUND,
    COMMAND_TIMEOUT,
    pid_namespace,
    resolve_command,
    run_command,
)
from debug_hang.probe.node_probe import probe_node
from debug_hang.probe.pyspy import (
    NOT_PYTHON,
    PERMISSION_DENIED,
    PROCESS_EXITED,
    PYSPY_MISSING,
    DumpOptions,
    dump_pid,
    explain_failure,
    find_pyspy,
    validate_pid,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PYSPY = find_pyspy()
needs_pyspy = pytest.mark.skipif(PYSPY is None, reason="py-spy not installed")

TARGET = textwrap.dedent("""\
    import subprocess, sys, threading
    def parked():
        print("READY", flush=True)
        threading.Event().wait()
    if len(sys.argv) > 1:  # also start a Python child and a non-Python child
        subprocess.Popen([sys.executable, __file__])
        subprocess.Popen(["sleep", "300"])
    parked()
    """)
PARKED_LINE = 4


def start_target(tmp_path: Path, with_children: bool = False) -> subprocess.Popen[str]:
    script = tmp_path / "target.py"
    script.write_text(TARGET)
    argv = [sys.executable, str(script)] + (["children"] if with_children else [])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    time.sleep(0.2)  # from the print to the wait on the next line
    return proc


@pytest.fixture
def target(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = start_target(tmp_path)
    yield proc
    proc.kill()
    proc.wait()


@pytest.fixture
def family(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    proc = start_target(tmp_path, with_children=True)
    time.sleep(0.5)  # the children start after READY
    yield proc
    os.killpg(proc.pid, 9)
    proc.wait()


# --- pid validation ----------------------------------------------------------------------------

@pytest.mark.parametrize("good", [1, 4242, "4242", " 17 ", 4_194_304])
def test_valid_pids_become_ints(good: object) -> None:
    assert validate_pid(good) == int(str(good).strip())


@pytest.mark.parametrize("bad", [0, -1, "12a", "1;rm -rf /", "$(id)", True, None, 1.5, 4_194_305, "",
                                 "\u0663", "\u00b2"])
def test_anything_else_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="invalid pid"):
        validate_pid(bad)


@given(st.one_of(st.text(), st.from_regex(r"\A\s*[0-9]{1,8}\s*\Z")))
def test_only_ascii_digits_ever_pass(text: str) -> None:
    try:
        pid = validate_pid(text)
    except ValueError:
        return
    digits = text.strip()
    assert digits.isascii() and digits.isdigit() and pid == int(digits) > 0


def test_native_with_nonblocking_is_refused_naming_both() -> None:
    with pytest.raises(UsageError, match="--native and --nonblocking"):
        DumpOptions(native=True, nonblocking=True)


# --- dumping real processes --------------------------------------------------------------------

@needs_pyspy
def test_dump_of_a_parked_python_process_shows_the_frame_and_line(target: subprocess.Popen[str]) -> None:
    result = dump_pid(target.pid, DumpOptions())
    assert result.error is None and result.kind is None
    [proc] = result.processes
    main = proc.threads[0]
    assert main.active is False
    assert ("parked", PARKED_LINE) in [(f.function, f.line) for f in main.frames]
    assert proc.title is not None and "target.py" in proc.title


@needs_pyspy
def test_nonblocking_and_native_dumps_also_work(target: subprocess.Popen[str]) -> None:
    for options in (DumpOptions(nonblocking=True), DumpOptions(native=True)):
        result = dump_pid(target.pid, options)
        assert result.error is None, (options, result.error)
        assert "parked" in [f.function for t in result.processes[0].threads for f in t.frames]


@needs_pyspy
def test_a_process_that_exited_after_listing_is_reported_as_exited(tmp_path: Path) -> None:
    proc = start_target(tmp_path)
    proc.kill()
    proc.wait()
    result = dump_pid(proc.pid, DumpOptions())
    assert result.kind == PROCESS_EXITED and "exited" in (result.error or "")
    probe = probe_node("n1", [proc.pid], {}, samples=1)
    assert [(e["pid"], e["kind"]) for e in probe["errors"]] == [(proc.pid, PROCESS_EXITED)]
    assert probe["processes"] == []


@needs_pyspy
def test_an_exited_but_unreaped_process_is_reported_as_exited() -> None:
    zombie = subprocess.Popen(["true"])
    try:
        time.sleep(0.3)  # exited; not waited for, so its /proc entry stays (state Z)
        assert Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        result = dump_pid(zombie.pid, DumpOptions())
    finally:
        zombie.wait()
    assert result.kind == PROCESS_EXITED


@needs_pyspy
def test_a_non_python_process_is_reported_as_such() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.2)
        result = dump_pid(sleeper.pid, DumpOptions())
    finally:
        sleeper.kill()
        sleeper.wait()
    assert result.kind == NOT_PYTHON
    assert "Failed to find python version" in (result.error or "")


@needs_pyspy
def test_pyspy_error_keeps_its_message_without_the_rust_backtrace() -> None:
    # GIVEN py-spy's real stderr with RUST_BACKTRACE=1 (as this machine's environment sets it)
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.2)
        assert PYSPY is not None
        real = subprocess.run([PYSPY, "dump", "--pid", str(sleeper.pid)], capture_output=True,
                              env={**os.environ, "RUST_BACKTRACE": "1"}, timeout=30, check=False)
        # WHEN explained THEN the error line is kept and the backtrace dropped
        kind, message = explain_failure(sleeper.pid, real.stderr)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert b"Stack backtrace" in real.stderr
    assert kind == NOT_PYTHON
    assert "Failed to find python version" in message and "backtrace" not in message
    assert "rust_begin_short_backtrace" not in message


@needs_pyspy
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run py-spy as an unprivileged user")
def test_permission_denied_explains_ptrace(target: subprocess.Popen[str], tmp_path: Path) -> None:
    # GIVEN the real py-spy run as `nobody` against a root-owned process (no ptrace rights)
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(f"#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups {PYSPY} \"$@\"\n")
    wrapper.chmod(0o755)
    # WHEN dumped THEN a permission error that explains ptrace, SYS_PTRACE and ptrace_scope
    result = dump_pid(target.pid, DumpOptions(), pyspy=str(wrapper))
    assert result.kind == PERMISSION_DENIED
    message = result.error or ""
    assert "ptrace" in message and "SYS_PTRACE" in message and "ptrace_scope" in message
    assert "sudo" not in message  # py-spy's own advice is replaced, not echoed


def bare_python(root: Path) -> str:
    """A real venv without py-spy: its site-packages point at ours, its bin/ holds only python."""
    venv = root / "bare"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    purelib = Path(sysconfig.get_paths()["purelib"])
    (venv / purelib.relative_to(sys.prefix) / "ours.pth").write_text(f"{purelib}\n{ROOT}\n")
    return str(venv / "bin" / "python")


def test_pyspy_missing_is_one_clear_node_error(target: subprocess.Popen[str], tmp_path: Path) -> None:
    # GIVEN a Python environment without py-spy, and a PATH without it
    python = bare_python(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    assert shutil.which("py-spy", path=env["PATH"]) is None
    code = ("import json; from debug_hang.probe.node_probe import probe_node; "
            f"print(json.dumps(probe_node('n1', [{target.pid}], {{}}, 1)))")
    # WHEN the probe runs there
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=True)
    result = json.loads(out.stdout)
    # THEN one node-level error says py-spy is missing, where it looked, and how to install it
    assert result["pyspy"] is None and result["processes"] == []
    [error] = result["errors"]
    assert error["kind"] == PYSPY_MISSING and error["pid"] is None and error["pids"] == [target.pid]
    assert "PATH (/usr/bin:/bin)" in error["error"] and f"{python} -m pip install py-spy" in error["error"]
    # AND the rest of the evidence is still there
    assert result["info"][str(target.pid)]["title"].endswith("target.py")


def test_pyspy_beside_python_is_found_when_path_lacks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    beside = Path(sys.executable).parent / "py-spy"
    if not os.access(beside, os.X_OK):
        pytest.skip("py-spy is not installed beside this Python")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert find_pyspy() == str(beside)
    assert resolve_command(["py-spy", "--version"]) == [str(beside), "--version"]


# --- probe_node --------------------------------------------------------------------------------

@needs_pyspy
def test_probe_dumps_python_children_and_skips_non_python_ones(family: subprocess.Popen[str]) -> None:
    # GIVEN a parked parent with a parked Python child and a `sleep` child
    result = probe_node("n1", [family.pid], {}, samples=2, interval_s=0.2)
    info = result["info"]
    children = {int(pid): v for pid, v in info.items() if v["child_of"] == family.pid}
    py_child = next(pid for pid, v in children.items() if "target.py" in (v["title"] or ""))
    sleeper = next(pid for pid, v in children.items() if (v["title"] or "").startswith("sleep"))
    # THEN both Pythons are dumped twice (two samples), tagged with the node
    dumped = [(p["pid"], p["sample"]) for p in result["processes"]]
    assert sorted(dumped) == sorted([(family.pid, 0), (family.pid, 1), (py_child, 0), (py_child, 1)])
    assert all(p["node_id"] == "n1" for p in result["processes"])
    # AND the non-Python child is noted in its info, not reported as an error
    assert result["errors"] == []
    assert info[str(sleeper)]["dump"] == NOT_PYTHON
    assert info[str(family.pid)]["cpu_percent"] < 50
    assert result["pid_namespace"] == pid_namespace() and result["samples_taken"] == 2


@needs_pyspy
def test_a_target_listed_twice_or_also_a_child_is_dumped_once(family: subprocess.Popen[str]) -> None:
    first = probe_node("n1", [family.pid], {}, samples=1)
    child = next(int(pid) for pid, v in first["info"].items()
                 if v["child_of"] == family.pid and "target.py" in (v["title"] or ""))
    result = probe_node("n1", [family.pid, child, family.pid], {}, samples=1)
    assert sorted(p["pid"] for p in result["processes"]) == sorted([family.pid, child])
    assert result["info"][str(child)]["child_of"] is None  # a target in its own right


@needs_pyspy
def test_probe_budget_cuts_samples_short(target: subprocess.Popen[str]) -> None:
    start = time.monotonic()
    result = probe_node("n1", [target.pid], {}, samples=10, interval_s=1.0, budget_s=2.5)
    assert time.monotonic() - start < 4
    assert 1 <= result["samples_taken"] < 10


# --- one bound on py-spy processes for every probe of this process ------------------------------

# A real py-spy behind a wrapper that notes how many dumps run at that moment (a file per running
# dump) and holds its dump a little longer, so that overlapping dumps really overlap.
COUNTING_PYSPY = """#!/bin/sh
d="{folder}"
touch "$d/run.$$"
ls "$d" | grep -c '^run' >> "$d/counts"
sleep 0.3
"{real}" "$@"
rc=$?
rm -f "$d/run.$$"
exit $rc
"""


@needs_pyspy
def test_local_probes_of_many_nodes_share_one_bound_on_running_dumps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from debug_hang.probe.pyspy import MAX_PARALLEL_DUMPS

    # GIVEN 3 "nodes" probed at once from this process (a loopback cluster: every node is local),
    # 4 parked Pythons each: 12 dumps at once if each probe used its own pool of 8
    procs = [start_target(tmp_path) for _ in range(12)]
    folder = tmp_path / "running"
    folder.mkdir()
    (tmp_path / "bin").mkdir()
    wrapper = tmp_path / "bin" / "py-spy"
    wrapper.write_text(COUNTING_PYSPY.format(folder=folder, real=PYSPY))
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ.get('PATH', '')}")
    results: dict[str, dict[str, object]] = {}
    try:
        threads = [threading.Thread(target=lambda i=i: results.update(
            {f"n{i}": probe_node(f"n{i}", [p.pid for p in procs[4 * i:4 * i + 4]], {}, samples=1,
                                 children=False)})) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    # WHEN the wrapper's counts are read
    counts = [int(line) for line in (folder / "counts").read_text().split()]
    # THEN every process was dumped, in parallel, never more than MAX_PARALLEL_DUMPS at once
    assert len(counts) == 12
    assert 1 < max(counts) <= MAX_PARALLEL_DUMPS, counts
    for i in range(3):
        value = results[f"n{i}"]
        assert value["errors"] == [], value["errors"]
        assert sorted(p["pid"] for p in value["processes"]) == sorted(p.pid for p in procs[4 * i:4 * i + 4])  # type: ignore[attr-defined]


@needs_pyspy
def test_a_dump_that_finds_no_free_slot_in_its_timeout_is_a_timeout_and_runs_nothing(
        target: subprocess.Popen[str]) -> None:
    import pickle

    from debug_hang.probe import pyspy

    # GIVEN every py-spy slot of this process taken
    held = 0
    while pyspy._SLOTS.acquire(0.0):
        held += 1
    try:
        # WHEN a dump is asked with a 0.3 s timeout
        start = time.monotonic()
        result = dump_pid(target.pid, DumpOptions(timeout_s=0.3))
        # THEN it gives up within its timeout, saying why
        assert result.kind == "dump-timeout" and "no py-spy slot" in (result.error or "")
        assert time.monotonic() - start < 2
        # AND the slots pickle as a fresh, free set (what a helper task gets on its node)
        copy = pickle.loads(pickle.dumps(pyspy._SLOTS))
        assert copy.size == held == pyspy.MAX_PARALLEL_DUMPS and copy.acquire(0.0)
    finally:
        for _ in range(held):
            pyspy._SLOTS.release()
    # AND once the slots are free again the same dump works
    assert dump_pid(target.pid, DumpOptions(timeout_s=10)).error is None


# --- run_command -------------------------------------------------------------------------------

def test_command_argv_reaches_the_program_uninterpreted() -> None:
    result = run_command(["echo", "$HOME | wc -l; `id`"], timeout_s=10)
    assert result["returncode"] == 0 and result["stdout"] == "$HOME | wc -l; `id`\n"
    assert result["error"] is None and result["kind"] is None


def test_command_timeout_kills_its_whole_process_group() -> None:
    # GIVEN a command whose own child would outlive it
    start = time.monotonic()
    result = run_command(["sh", "-c", "sleep 60 & echo $!; wait"], timeout_s=1.5)
    # THEN it is cut at the timeout, and the grandchild is gone too
    assert time.monotonic() - start < 5
    assert result["kind"] == COMMAND_TIMEOUT and "1.5s" in result["error"]
    grandchild = int(result["stdout"].split()[0])
    time.sleep(0.2)
    assert not os.path.exists(f"/proc/{grandchild}") or "Z" in Path(f"/proc/{grandchild}/stat").read_text().split()[2]


def test_a_timed_out_command_whose_daemon_keeps_its_pipes_open_still_answers() -> None:
    # GIVEN a command that starts a process in a session of its own (out of reach of the group
    # kill) which keeps the command's stdout open (3 s: under load the daemon must have left the
    # group before the kill, or there is no daemon to test)
    start = time.monotonic()
    result = run_command(["sh", "-c", "setsid sleep 20.0417 & sleep 30"], timeout_s=3.0)
    # THEN the probe answers within the timeout and the drain, not when the daemon exits
    try:
        assert time.monotonic() - start < 3.0 + 2 * 2.0 + 2.0
        assert result["kind"] == COMMAND_TIMEOUT and "output is lost" in result["error"]
    finally:
        subprocess.run(["pkill", "-f", "^sleep 20.0417$"], check=False)  # the daemon (a unique duration)


def test_command_answers_before_the_callers_deadline() -> None:
    start = time.monotonic()
    result = run_command(["sleep", "30"], timeout_s=30, deadline=time.time() + 4)
    assert result["kind"] == COMMAND_TIMEOUT and time.monotonic() - start < 4


def test_command_output_is_cut_with_the_count() -> None:
    result = run_command([sys.executable, "-c", "print('x' * 5000)"], timeout_s=30, max_output=100)
    assert result["stdout"] == "x" * 100 and result["stdout_cut"] == 4901


def test_missing_command_is_reported_not_raised() -> None:
    result = run_command(["no-such-program-xyz"], timeout_s=5)
    assert result["kind"] == COMMAND_NOT_FOUND and result["returncode"] is None
    assert "'no-such-program-xyz'" in result["error"] and "PATH=" in result["error"]


# --- progress readings between the samples --------------------------------------------------
WRITER = textwrap.dedent("""\
    import os, sys, time
    out = open(sys.argv[1], "wb")
    print("READY", flush=True)
    for step in range(10_000):
        out.write(b"x" * 65536)
        out.flush()
        print(f"step {step}/10000", flush=True)
        time.sleep(0.1)
    """)


@needs_pyspy
def test_probe_reads_what_a_process_wrote_and_logged_between_samples(tmp_path: Path) -> None:
    # GIVEN a process that writes 64 KiB and logs a progress line every 0.1 s, stdout in a file
    script, log = tmp_path / "writer.py", tmp_path / "writer.out"
    script.write_text(WRITER)
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(script), str(tmp_path / "data.bin")], stdout=fh)
    try:
        deadline = time.monotonic() + 20
        while b"READY" not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        # WHEN the node probe samples it twice
        value = probe_node("local", [proc.pid], DumpOptions().to_dict(), samples=2, interval_s=0.5, children=False)
    finally:
        proc.kill()
        proc.wait()
    # THEN the window holds its write bytes and the new log lines, with the ones before them
    window = value["info"][str(proc.pid)]["progress"]
    assert window["window_s"] >= 0.5
    assert window["io"]["wchar"] >= 65536
    (out,) = [entry for entry in window["logs"] if entry["fd"] == 1]
    assert out["name"] == "writer.out" and out["lines"] >= 2 and out["bytes"] > 0
    assert out["new"][-1].startswith("step ") and out["tail"][-1].startswith("step ")


@needs_pyspy
def test_a_parked_process_shows_a_silent_window(target: subprocess.Popen[str]) -> None:
    value = probe_node("local", [target.pid], DumpOptions().to_dict(), samples=2, interval_s=0.3, children=False)
    window = value["info"][str(target.pid)]["progress"]
    assert window["io"]["wchar"] == 0 and window["io"]["write_bytes"] == 0
    assert all(entry["bytes"] == 0 for entry in window["logs"])


@needs_pyspy
def test_samples_start_the_interval_apart_so_dump_time_is_not_added(target: subprocess.Popen[str]) -> None:
    # GIVEN three samples 0.6 s apart of a live process
    result = probe_node("n1", [target.pid], {}, samples=3, interval_s=0.6, children=False)
    offsets = result["sample_offsets_s"]
    # THEN each sample starts 0.6 s after the previous one started, never sooner ...
    assert len(offsets) == 3 == result["samples_taken"]
    gaps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    assert all(gap >= 0.6 - 0.002 for gap in gaps), gaps
    # ... and no later: the round's dumps run inside the wait, so a gap is the interval plus only
    # the sleep's own lateness, whatever the dumps cost
    assert all(gap < 0.6 + 0.15 for gap in gaps), gaps


# --- a busy thread: the loop it runs, how long it was runnable, one window over two rounds -------

SPINNER = textwrap.dedent("""\
    import sys
    class Cache:
        ready = False
        def lookup(self):
            print("READY", flush=True)
            spins = 0
            while not self.ready:
                spins += 1
            return spins
    Cache().lookup()
    """)


@pytest.fixture
def spinner(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    script = tmp_path / "spinner.py"
    script.write_text(SPINNER)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    yield proc
    proc.kill()
    proc.wait()


@needs_pyspy
def test_a_spinning_thread_brings_its_whole_loop_and_reads_busy_by_its_run_queue_time(
        spinner: subprocess.Popen[str]) -> None:
    # GIVEN a real process spinning in `while not self.ready: spins += 1` (on a machine other
    # sessions load: its CPU share may be small)
    # WHEN its node probe samples it twice
    value = probe_node("local", [spinner.pid], DumpOptions().to_dict(), samples=2, interval_s=0.5, children=False)
    info = value["info"][str(spinner.pid)]
    # THEN the spinning frame carries the loop's source from its header to the line after it
    frame = value["processes"][0]["threads"][0]["frames"][0]
    assert frame["function"] == "Cache.lookup" and frame["line"] in (7, 8)
    assert any(line.startswith("7:") and "while not self.ready" in line for line in frame["context"]), frame
    assert any(line.startswith("9:") and "return spins" in line for line in frame["context"]), frame
    # ... and its busiest thread was runnable (on a CPU or waiting for one) nearly all the window,
    # whatever share of a CPU it got
    assert info["runnable_percent"] >= 80, info
    assert len(info["sampled_at"]) == 2 and info["sampled_at"][1] - info["sampled_at"][0] >= 0.45


@needs_pyspy
def test_a_second_round_reads_one_window_from_the_first_rounds_start(target: subprocess.Popen[str]) -> None:
    # GIVEN a first round of samples, and the readings it took before its first sample
    first = probe_node("local", [target.pid], {}, samples=2, interval_s=0.4, children=False)
    start = first["info"][str(target.pid)]["window_start"]
    time.sleep(0.3)
    # WHEN a second round is given them
    second = probe_node("local", [target.pid], {}, samples=2, interval_s=0.4, children=False,
                        since={str(target.pid): start})
    # THEN its progress window and CPU use run from the first round's start to its own end
    window = second["info"][str(target.pid)]["progress"]["window_s"]
    assert window >= 0.4 + 0.3 + 0.4 - 0.05, window
    assert second["info"][str(target.pid)]["window_start"]["wall"] == start["wall"]


def test_an_idle_event_loop_s_epoll_timeout_tells_a_timer_from_none() -> None:
    import asyncio
    import threading

    from debug_hang.analyse.graph.inprocess import loop_poll_timeout_ms
    from debug_hang.model import Thread
    from debug_hang.probe.node_probe import add_loop_syscalls

    # GIVEN a real idle asyncio loop on a thread named as Ray names an async actor's loop thread
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="AsyncIO Thread: default", daemon=True)
    thread.start()
    seen = Thread(os_thread_id=thread.native_id, name=thread.name)
    procs = [{"pid": os.getpid(), "threads": [{"name": thread.name, "os_thread_id": thread.native_id}]}]

    def read() -> int | None:
        time.sleep(0.3)  # the loop is back in its epoll wait
        info: dict[int, dict[str, object]] = {os.getpid(): {}}
        add_loop_syscalls(info, procs)
        return loop_poll_timeout_ms(seen, {str(k): v for k, v in info[os.getpid()].items()})

    try:
        # WHEN the node reads the system call its thread sleeps in, with nothing scheduled, then
        # with a timer due in 30 s THEN the timeout is -1 (no timer), then about 30 000 ms
        assert read() == -1
        loop.call_soon_threadsafe(loop.call_later, 30, lambda: None)
        due = read()
        assert due is not None and 25_000 < due <= 30_000
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
