"""A thread asleep reading an empty os.pipe(), on real captures (tests/data/captures/README.md):
the node probe reads the pipe (the thread's `pipe_read` wchan and the read's descriptor) and who
holds its write end; the reader is a queue consumer whose producers are those processes, and when
only its own process holds the write end and no other thread runs job code, the producer is gone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
GONE = CAPTURES / "pipe_writer_thread_gone"
CHILD_WRITES = CAPTURES / "pipe_read_child_writer_computes_healthy"


def _reads(stacks: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for info in stacks["meta"]["info"] for r in info.get("pipe_reads") or []]


def test_a_pipe_only_its_own_process_writes_with_the_writer_thread_gone_is_producer_gone() -> None:
    # GIVEN next_batch in os.read on a pipe whose decode thread raised; the actor holds the only write end
    doc = to_json(reanalyse(GONE))
    # THEN the consumer waits for a producer that is gone, the actor named, the pipe quoted
    assert doc["verdict"] == "hang", doc["summary"]
    cause = doc["root_causes"][0]
    assert cause["pattern"] == "producer-gone", cause
    evidence = "\n".join(cause["evidence"])
    assert "whose only write end on the node this process holds" in evidence, evidence


def test_a_write_end_another_process_holds_leads_there_instead(tmp_path: Path) -> None:
    # GIVEN the same capture, with another process of the node holding the write end too
    def another_writer(stacks: dict[str, Any]) -> None:
        for read in _reads(stacks):
            read["writers"] = sorted(read["writers"] + [424242])

    doc = to_json(reanalyse(capture_variant(tmp_path, GONE, stacks=another_writer)))
    # THEN no producer is said to be gone: the wait leads to that process
    assert "producer-gone" not in {c["pattern"] for c in doc["root_causes"]}, doc["summary"]
    assert doc["verdict"] != "hang", doc["summary"]


def test_unreadable_writers_say_nothing_of_the_producer(tmp_path: Path) -> None:
    # GIVEN the same capture, where the probe could not read every process's descriptors
    def unread(stacks: dict[str, Any]) -> None:
        for read in _reads(stacks):
            read["writers"] = None

    doc = to_json(reanalyse(capture_variant(tmp_path, GONE, stacks=unread)))
    # THEN the producer is not said to be gone
    assert "producer-gone" not in {c["pattern"] for c in doc["root_causes"]}, doc["summary"]


def test_a_pipe_a_computing_child_writes_is_no_hang() -> None:
    # GIVEN an actor reading an os.pipe() whose only writer, a forked child, computes between frames
    diag = reanalyse(CHILD_WRITES)
    # THEN the job computes, and the reader's wait leads to the child that holds the write end
    assert diag.verdict == "no-hang", diag.summary
    edges = [e for e in diag.graph.edges if e.why == "queue-get-wait"]
    assert edges and all("whose write end pid" in e.evidence for e in edges), edges
    assert {diag.graph.nodes[e.dst].state for e in edges} == {"busy"}
