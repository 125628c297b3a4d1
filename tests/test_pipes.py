"""The pipe facts of the node probe (probe/pipes.py), read from real processes on this machine."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from debug_hang.analyse.patterns import catalog
from debug_hang.probe.node_probe import probe_node
from debug_hang.probe.pipes import child_pipes

pytestmark = pytest.mark.unit

CHILD = "import sys\nfor i in range(40000): sys.stdout.write('row %06d ' % i + 'x' * 40 + '\\n')\n"
PARENT = ("import subprocess, sys\n"
          "proc = subprocess.Popen([sys.executable, '-c', {child!r}], stdout=subprocess.PIPE)\n"
          "{wait}\n")


def _family(wait: str, child_code: str = CHILD) -> Iterator[tuple[int, int]]:
    code = PARENT.format(child=child_code, wait=wait)
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        child = None
        while time.monotonic() < deadline and child is None:
            found = subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split()
            child = int(found[0]) if found else None
            time.sleep(0.1)
        assert child is not None, "the parent did not start its child"
        yield parent.pid, child
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(parent.pid)], check=False)
        parent.kill()
        parent.wait()


@pytest.fixture
def pipe_full() -> Iterator[tuple[int, int]]:
    """A parent in Popen.wait() whose child writes 2 MB into its stdout pipe: a real deadlock."""
    yield from _family("proc.wait()")


def _kernel_write_wait(wchans: dict[str, str]) -> bool:
    rules = catalog()["pipe-write-wait"].kernel_waits
    return any(r.search(name) for r in rules for name in wchans.values())


def test_a_child_blocked_writing_its_stdout_pipe_is_seen_with_the_parent_holding_the_read_end(
        pipe_full: tuple[int, int]) -> None:
    parent, child = pipe_full
    deadline = time.monotonic() + 10
    facts = child_pipes(child, parent)
    while time.monotonic() < deadline and not (facts and _kernel_write_wait(facts["wchan"])):
        time.sleep(0.2)  # the child fills the 64 KiB pipe within milliseconds of starting
        facts = child_pipes(child, parent)
    assert facts is not None
    assert _kernel_write_wait(facts["wchan"]), facts["wchan"]
    assert facts["std_pipes"]["1"]["parent_ends"] == ["read"]
    assert re.fullmatch(r"\d+", str(facts["std_pipes"]["1"]["inode"]))


def test_the_probe_reports_the_pipe_of_a_targets_child(pipe_full: tuple[int, int]) -> None:
    parent, child = pipe_full
    time.sleep(0.5)
    value = probe_node("n1", [parent], {}, samples=1, children=True)
    info = value["info"][str(child)]
    assert info["child_of"] == parent
    assert info["std_pipes"]["1"]["parent_ends"] == ["read"]
    assert _kernel_write_wait(info.get("wchan") or {}), info.get("wchan")


def test_a_child_whose_output_is_read_is_not_blocked_on_its_pipe() -> None:
    # GIVEN a parent that reads while it waits (communicate), and a child that writes the same
    # 2 MB and then stays alive (so that it is still there to be read)
    for parent, child in _family("proc.communicate()", CHILD + "import time\ntime.sleep(60)\n"):
        time.sleep(0.5)
        facts = child_pipes(child, parent)
        # THEN its stdout is the parent's pipe, but the child is not asleep writing it
        assert facts is not None and facts["std_pipes"]["1"]["parent_ends"] == ["read"]
        assert not _kernel_write_wait(facts["wchan"]), facts["wchan"]


def test_a_process_without_pipes_on_its_standard_descriptors_has_no_pipe_facts() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        assert child_pipes(proc.pid, None) is None
    finally:
        proc.kill()
        proc.wait()


def test_a_child_whose_pipe_is_drained_slowly_writes_during_the_window() -> None:
    # GIVEN a parent reading its child's output slowly, line by line: the child is often asleep
    # writing a full pipe, but the pipe drains, so it writes bytes over any window
    from debug_hang.probe.pyspy import find_pyspy

    if find_pyspy() is None:
        pytest.skip("py-spy not installed (the window needs two samples)")
    slow = "import time\nfor line in proc.stdout:\n    time.sleep(0.002)\n"
    for parent, child in _family(slow):
        time.sleep(0.3)
        value = probe_node("n1", [parent], {}, samples=2, interval_s=0.5, children=True)
        io = value["info"][str(child)]["progress"]["io"]
        # THEN the probe sees its writes (wchar), which is what tells it from a deadlock
        assert io["wchar"] > 0, io
