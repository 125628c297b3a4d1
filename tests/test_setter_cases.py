"""Who sets what an actor waits on: an event nothing in the actor's own process sets is released
only by a call of a method of its class that sets it (read from its source on the node), so the
wait leads to the processes whose code makes that call after their current line. A caller that
waits, down its chain, on the actor closes a program-order deadlock and is the culprit
(set-order-deadlock); when no process shows the call, the actor's reading stays and says so.

The capture is the red-team job `redteam/eval_results_gather.py`, recorded live
(tests/data/captures/README.md): the driver's `ray.wait(refs, num_returns=len(refs))` waits on a
shard that waits on `Gate.wait`, and the driver calls `gate.open.remote()` on the next line.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.setters import calls_after, setters_of

pytestmark = pytest.mark.unit

GATHER = ROOT / "tests" / "data" / "captures" / "event_setter_called_after_wait"




def driver_frames(edit: Callable[[list[dict[str, Any]]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            if proc.get("role") == "driver":
                for thread in proc["threads"]:
                    edit(thread["frames"])
    return apply


def test_the_caller_that_opens_the_gate_after_its_wait_is_the_culprit() -> None:
    # GIVEN the driver in ray.wait on a shard that waits on Gate.wait, and `gate.open.remote()` on its next line
    diag = reanalyse(GATHER)
    # THEN a program-order deadlock whose only culprit is the driver; the Gate and the shard are victims
    assert diag.verdict == "hang"
    cause = diag.causes[0]
    assert cause.pattern == "set-order-deadlock"
    assert [c.kind for c in cause.culprits] == ["driver"]
    assert {diag.graph.nodes[v].class_name or diag.graph.nodes[v].name for v in cause.victims} >= {"Gate", "score_shard"}
    closing = next(e for e in diag.graph.edges if e.why == "setter-call")
    assert not closing.guessed and "Gate.open" in closing.evidence and "gate.open.remote()" in closing.evidence


def test_a_setter_call_in_no_waiters_code_leaves_the_gate_the_culprit(tmp_path: Path) -> None:
    # WHEN the driver's code shows no call of Gate.open after its wait (the call is elsewhere, or never made)
    edited = capture_variant(tmp_path, GATHER, driver_frames(lambda frames: [f.pop("calls_after", None) for f in frames]))
    diag = reanalyse(edited)
    # THEN the driver is no culprit: the Gate's event is set by nothing seen, and the report says who sets it
    cause = diag.causes[0]
    assert (diag.verdict, cause.pattern) == ("hang", "event-never-set")
    assert [c.class_name for c in cause.culprits] == ["Gate"]
    assert any("set only by Gate.open" in text and "nothing seen calls it" in text for text in cause.evidence)


def test_a_call_of_another_method_is_no_setter_call(tmp_path: Path) -> None:
    # WHEN the driver's later call is of a method that does not set the event (gate.close.remote())
    def rename(frames: list[dict[str, Any]]) -> None:
        for f in frames:
            if f.get("calls_after"):
                f["calls_after"] = [item.replace("open:", "close:") for item in f["calls_after"]]
    diag = reanalyse(capture_variant(tmp_path, GATHER, driver_frames(rename)))
    assert (diag.causes[0].pattern, [c.class_name for c in diag.causes[0].culprits]) == ("event-never-set", ["Gate"])


def test_the_probe_reads_the_setters_of_the_waited_object_and_the_later_ray_calls(tmp_path: Path) -> None:
    src = tmp_path / "job.py"
    src.write_text(textwrap.dedent('''\
        import ray, threading

        @ray.remote(max_concurrency=4)
        class Gate:
            def __init__(self):
                self.opened = threading.Event()
                self.cond = threading.Condition()

            def wait(self):
                self.opened.wait()

            def open(self):
                self.opened.set()

            def poke(self):
                with self.cond:
                    self.cond.notify_all()

        class Other:
            def open(self):
                self.opened.set()

        def main(gate, work):
            ray.wait([work.remote()])
            def later():
                gate.poke.remote()
            gate.open.remote()
            work.options(num_cpus=1).remote()
    '''))
    # the methods of the waiter's own class that set the object waited on (not Other.open, not poke)
    assert setters_of(str(src), 10) == ["Gate.open:13"]
    assert setters_of(str(src), 13) == []  # a line that waits on nothing
    # the Ray calls of main after its line: not the nested function's, not the ray.remote decorator
    assert calls_after(str(src), 24) == ["open:27", "work:28"]
    assert calls_after(str(src), 3) == []
