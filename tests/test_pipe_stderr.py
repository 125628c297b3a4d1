"""A child whose stderr pipe is full while its parent reads only its stdout, on a real capture
(tests/data/captures/pipe_stderr_full_parent_reads_stdout, redteam/tokenizer_cli_stderr.py): the
report must say which pipe is full and which one the parent reads, since the fix is to drain stderr."""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "pipe_stderr_full_parent_reads_stdout"


def test_the_parent_edge_names_the_pipe_it_reads_and_the_child_edge_the_full_one() -> None:
    # GIVEN a parent in `for line in proc.stdout:` and its child asleep writing its stderr
    doc = to_json(reanalyse(CAPTURE))
    # THEN it is the pipe deadlock, parent first
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "pipe-full-deadlock"
    evidence = "\n".join(cause["evidence"])
    # AND the parent's edge says it reads the child's (empty) stdout, not that it waits for its exit
    assert "reads child pid" in evidence and "stdout (fd 1" in evidence, evidence
    assert "waits for child pid" not in evidence, evidence
    # AND the child's edge says the full pipe is its stderr
    assert "blocked writing its stderr (fd 2" in evidence, evidence


def test_a_parent_blocked_writing_the_childs_stdin_is_named_so_on_both_edges() -> None:
    # GIVEN a parent in `proc.stdin.write(data)` (10 MB) before any read, its child asleep writing
    # its full stdout (tests/data/captures/pipe_stdin_and_stdout_both_full)
    doc = to_json(reanalyse(ROOT / "tests" / "data" / "captures" / "pipe_stdin_and_stdout_both_full"))
    # THEN it is the pipe deadlock, the parent first
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "pipe-full-deadlock"
    assert cause["culprits"][0]["class_name"] == "Normalizer"
    evidence = "\n".join(cause["evidence"])
    # AND the parent's edge says it writes the child's full stdin, not that it waits for its exit
    assert "writes child pid" in evidence and "stdin (fd 0" in evidence and "full: the write waits" in evidence, evidence
    assert "waits for child pid" not in evidence and "to exit instead of reading" not in evidence, evidence
    # AND the child's edge names its full stdout
    assert "blocked writing its stdout (fd 1" in evidence, evidence
