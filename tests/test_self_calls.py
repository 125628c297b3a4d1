"""A wait on a call to the waiter's own actor, on recorded real captures: a self-edge only when the
call cannot run while the wait lasts (queued behind it, every thread of the actor waiting), else
followed to the thread of the same process that runs it (a threaded actor)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from debug_hang.analyse import graph as G
from debug_hang.analyse.analysis import graph_inputs
from debug_hang.analyse.busy import in_no_loop
from debug_hang.model import Process
from debug_hang.pipeline import load_capture, reanalyse

pytestmark = pytest.mark.unit
CASES = Path(__file__).resolve().parent / "data" / "cases"


def _first(proc: Process, cls: str, method: str) -> Process:
    """py-spy lists a process's threads in its own order, and ties between two threads with the
    same reading go to the first listed: the thread running `method` put first (the data as
    recorded, only the order changed) so that it decides the process."""
    if cls not in (proc.title or ""):
        return proc
    return dataclasses.replace(proc, threads=sorted(
        proc.threads, key=lambda t: not any(f.function.endswith(method) for f in t.frames)))


def _graph(case: str, cls: str, method: str) -> G.WaitGraph:
    cap = load_capture(CASES / case)
    coll = dataclasses.replace(cap.collection, processes=[_first(p, cls, method) for p in cap.collection.processes])
    return G.build_graph(graph_inputs(cap.job, cap.snapshot, coll))


def _edges(g: G.WaitGraph) -> set[tuple[str | None, str | None]]:
    return {(g.nodes[e.src].class_name, g.nodes[e.dst].class_name) for e in g.edges}


@pytest.mark.parametrize("method", ["build", "index_shard"])
def test_a_self_call_running_in_another_thread_is_followed_there(method: str) -> None:
    # GIVEN Indexer (max_concurrency=4): build waits in ray.get on index_shard, a call on its own
    # actor that RUNS in another thread, itself in ray.get on ShardStore.fetch
    g = _graph("threaded_actor_self_call", "Indexer", method)
    # THEN whichever of the two threads decides, the wait leads to ShardStore, never to itself
    assert ("Indexer", "Indexer") not in _edges(g)
    assert ("Indexer", "ShardStore") in _edges(g)
    indexer = next(n for n in g.nodes.values() if n.class_name == "Indexer")
    if method == "build":
        assert any("a call on its own actor that thread" in e and "not queued behind the wait" in e
                   for e in indexer.evidence), indexer.evidence


def test_every_thread_of_a_threaded_actor_waiting_on_itself_is_a_self_cycle() -> None:
    # GIVEN Featurizer (max_concurrency=2): both threads in ray.get on vocab calls queued behind them
    g = _graph("threaded_actor_slots_exhausted", "Featurizer", "featurize")
    # THEN the self-edge stands: no thread comes free to run them
    assert ("Featurizer", "Featurizer") in _edges(g)
    featurizer = next(n for n in g.nodes.values() if n.class_name == "Featurizer")
    assert any("no thread comes free" in e for e in featurizer.evidence), featurizer.evidence
    diag = reanalyse(CASES / "threaded_actor_slots_exhausted")
    assert diag.verdict == "hang"


def test_a_sleep_in_no_loop_is_no_poll() -> None:
    # GIVEN ShardStore.fetch at `time.sleep(READ_S)`, a statement of a method with no loop around it
    cap = load_capture(CASES / "threaded_actor_self_call")
    store = next(p for p in cap.collection.processes if "ShardStore" in (p.title or ""))
    frame = next(f for t in store.threads for f in t.frames if f.function.endswith("fetch"))
    assert in_no_loop(frame)
    # and the Indexer's build, whose ray.get is inside `for shard in range(...)`
    indexer = next(p for p in cap.collection.processes if "Indexer" in (p.title or ""))
    build = next(f for t in indexer.threads for f in t.frames if f.function.endswith("build"))
    assert not in_no_loop(build)
    # THEN the job, whose only silent process sleeps once per call, is not called hung
    diag = reanalyse(CASES / "threaded_actor_self_call")
    assert diag.verdict != "hang", diag.summary


def test_the_probe_reads_a_single_sleep_up_to_its_def_so_that_it_is_no_poll() -> None:
    # GIVEN a job frame at a sleep 8 lines below its `def`, in no loop (the throttle of
    # examples/throttled_checkpoint_upload.py sleeps once per acquire); 3 lines of context around
    # it did not reach the `def`, and a sleep of unknown shape read as a possible poll
    from debug_hang.model import Frame, Thread
    from debug_hang.probe.source_lines import add_source_lines

    path = str(CASES.parents[2] / "examples" / "throttled_checkpoint_upload.py")
    frame = Frame(function="TokenBucket.acquire", file=path, line=79)
    proc = Process(pid=1, threads=[Thread(os_thread_id=1, frames=[Frame(function="sleep", native=True), frame])])
    # WHEN the probe adds the source lines
    add_source_lines(proc)
    # THEN the context reaches the `def`, and the analysis reads the sleep as in no loop
    assert frame.context and frame.context[0].startswith("71:") and "def acquire" in frame.context[0], frame.context
    assert in_no_loop(frame)
