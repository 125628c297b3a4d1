"""A child asleep in a timed sleep is no hang, on a real capture
(tests/data/captures/healthy_shell_child_timed_sleep, redteam/healthy_shell_child_sleeps_window.py,
round 14c's false hang): a task waits in subprocess.run on `bash -c '...; sleep 240; ...'`; bash waits
in do_wait on `sleep 240`, asleep in hrtimer_nanosleep. The probe reads the sleep's requested
length from the thread's clock_nanosleep timespec (`sleep_request_s`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "healthy_shell_child_timed_sleep"


def test_a_child_in_a_timed_sleep_is_a_scheduled_release_not_a_hang() -> None:
    # GIVEN sync_mirror in Popen.wait, its bash child in do_wait, and `sleep 240` in hrtimer_nanosleep
    diag = reanalyse(CAPTURE)
    # THEN inconclusive: the sleeping child's wait ends by itself, 240 s after it began
    assert diag.verdict == "inconclusive", diag.summary
    assert "timed sleep of 240 s" in diag.summary, diag.summary
    sleeper = next(n for n in diag.graph.nodes.values() if n.release)
    assert sleeper.pattern == "child-process-hang" and "sleep 240" in sleeper.name


def test_a_child_asleep_for_an_unknown_length_is_still_a_child_that_never_exits(tmp_path: Path) -> None:
    # GIVEN the same capture without the sleep's length (what the probe reads for `sleep infinity`,
    # or when /proc/PID/mem cannot be read): the kernel's hrtimer_nanosleep alone says nothing of its end
    folder = tmp_path / "capture"
    shutil.copytree(CAPTURE, folder)
    stacks = folder / "stacks.json"
    text = stacks.read_text()
    doc = json.loads(text)
    assert "sleep_request_s" in text

    def drop(obj: object) -> None:
        if isinstance(obj, dict):
            obj.pop("sleep_request_s", None)
            for v in obj.values():
                drop(v)
        elif isinstance(obj, list):
            for v in obj:
                drop(v)

    drop(doc)
    stacks.write_text(json.dumps(doc))
    diag = reanalyse(folder)
    # THEN the hung reading stands: a child that never exits
    assert diag.verdict == "hang", diag.summary
    assert diag.causes[0].pattern == "child-process-hang"
