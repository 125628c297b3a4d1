"""A communicate() whose child has exited waits for the processes that still hold its pipes.

Real captures (redteam/, stop 42): an actor runs `subprocess.run(..., capture_output=True)` of a
launcher that starts a background process without redirecting its output and exits. The launcher
is a zombie; communicate() reads the pipes to end-of-file, which comes only when the background
process exits. The node probe finds it by its descriptors (`pipe_holders`, probe/pipes.py):
- daemon_server_holds_stdout: an HTTP server in serve_forever's untimed poll: a hang, the server;
- healthy_background_step_holds_stdout: a step that computes for 2 minutes, then exits: not hung;
- daemon_grandchild_naps_holds_stdout: a daemon napping in `time.sleep(5)`: inconclusive.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.node_probe import _holder_facts
from debug_hang.probe.pipes import polled_pipes
from debug_hang.redact import Redactor
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
SERVER = CAPTURES / "daemon_server_holds_stdout"
WORKING = CAPTURES / "healthy_background_step_holds_stdout"
NAPPING = CAPTURES / "daemon_grandchild_naps_holds_stdout"


def _top(case: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = to_json(reanalyse(case))
    return doc, doc["root_causes"][0]


def _holders(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [h for info in doc["meta"]["info"] for read in info.get("pipe_holders") or [] for h in read["holders"]]


def test_a_daemon_server_holding_the_pipes_is_the_culprit_of_a_hang() -> None:
    # GIVEN Indexer in communicate(), its launcher a zombie, the server (reparented) idle in poll()
    doc, top = _top(SERVER)
    # THEN a hang whose culprit is the server process, not the zombie nor the waiting actor
    assert doc["verdict"] == "hang", doc["summary"]
    assert top["pattern"] == "child-process-hang"
    assert [c["kind"] for c in top["culprits"]] == ["process"], top["culprits"]
    assert "serve_forever" in top["culprits"][0]["name"] or "http.server" in top["culprits"][0]["name"]
    assert any("inherited the pipe from the exited child" in e for e in top["evidence"]), top["evidence"]
    assert "redirected" in top["fix"] and "start_new_session" in top["fix"]


def test_a_background_step_that_works_is_no_hang() -> None:
    # GIVEN the same shape, the background step computing (14 s of CPU in its 18 s)
    doc, top = _top(WORKING)
    # THEN inconclusive, naming the step that holds the pipes and that it works
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert top["culprits"][0]["kind"] == "process"
    assert "it runs" in doc["summary"]


def test_a_daemon_asleep_on_a_timer_is_inconclusive() -> None:
    # GIVEN the daemon in time.sleep(5) in a loop (one reading: a timed sleep of unknown length)
    doc, top = _top(NAPPING)
    # THEN not a hang (it may wake and exit), the daemon named
    assert doc["verdict"] == "inconclusive", doc["summary"]
    assert top["culprits"][0]["kind"] == "process"
    assert "timed sleep" in doc["summary"]


def test_the_verdict_follows_what_the_holder_does(tmp_path: Path) -> None:
    # GIVEN the server capture with the holder's kernel wait edited: a timed sleep, then a
    # `sleep infinity` (nanosleep asked for years)
    def napping(doc: dict[str, Any]) -> None:
        for holder in _holders(doc):
            holder["wchan"] = {str(holder["pid"]): "hrtimer_nanosleep"}

    def for_ever(doc: dict[str, Any]) -> None:
        napping(doc)
        for holder in _holders(doc):
            holder["sleep_request_s"] = {str(holder["pid"]): 1e9}

    napped = to_json(reanalyse(capture_variant(tmp_path / "a", SERVER, stacks=napping)))
    endless = to_json(reanalyse(capture_variant(tmp_path / "b", SERVER, stacks=for_ever)))
    # THEN a timed sleep may end (inconclusive); a sleep of years never does (hang)
    assert napped["verdict"] == "inconclusive"
    assert endless["verdict"] == "hang"


def test_without_the_holders_reading_the_zombie_rule_stands(tmp_path: Path) -> None:
    # GIVEN the server capture without the probe's pipe_holders (an older probe)
    def unread(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            info.pop("pipe_holders", None)
    doc = to_json(reanalyse(capture_variant(tmp_path, SERVER, stacks=unread)))
    # THEN no culprit process, no hang: the parent with its zombie evidence
    assert doc["verdict"] != "hang"
    assert all(c["kind"] != "process" for c in doc["root_causes"][0]["culprits"])


LAUNCHER = ("import subprocess, sys\n"
            "subprocess.Popen([sys.executable, '-c', 'import select; select.select([], [], [])'])\n"
            "print('started', flush=True)\n")
PARENT = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {LAUNCHER!r}], capture_output=True)\n"


def test_the_probe_finds_who_holds_a_polled_pipe() -> None:
    # GIVEN a real parent in communicate() whose launcher left a daemon holding its stdout
    parent = subprocess.Popen([sys.executable, "-c", PARENT])
    daemons: list[int] = []
    try:
        reads: list[dict[str, Any]] = []
        for _ in range(150):  # up to 15 s on a loaded node
            time.sleep(0.1)
            reads = polled_pipes(parent.pid, [parent.pid])
            writers = {w for r in reads for w in r["writers"] or []}
            if writers and all(_holder_facts(w, Redactor())["ppid"] != parent.pid for w in writers):
                break  # the launcher has exited: only the daemon holds the pipes
        # THEN the pipes it polls, and the daemon (not itself) as the holder, idle in an untimed wait
        assert reads and all(r["writers"] for r in reads), reads
        daemons = sorted({w for r in reads for w in r["writers"]})
        assert parent.pid not in daemons and len(daemons) == 1
        facts = _holder_facts(daemons[0], Redactor())
        assert facts["ppid"] != parent.pid and facts["state"] == "S"
        assert "select.select" in (facts["title"] or "")
        assert facts.get("wchan") and facts.get("age_s", -1) >= 0
    finally:
        for pid in daemons:
            subprocess.run(["kill", str(pid)], check=False)
        parent.wait(timeout=10)
