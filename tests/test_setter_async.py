"""Who sets what an async actor's call awaits: a coroutine suspended in `await` has no frame, so
the awaited object is read from the running method's source on the node (`Process.awaiting`: the
`self.X` it awaits, the methods of its class that set X). A process that waits on the actor, down
its chain, and calls such a method only after its current line closes a program-order deadlock
and is the culprit (set-order-deadlock), not the awaiting actor.

The capture is the red-team job `redteam/label_vocab_first_batch.py`, recorded live
(tests/data/captures/README.md): the driver iterates a Ray Data dataset whose UDF actor
`ray.get`s `LabelStore.vocab` (awaiting `self.ready`), and calls `store.publish.remote()` (which
sets it) only once it has the first batch.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.model import Frame, Process, Thread
from debug_hang.pipeline import reanalyse
from debug_hang.probe.setters import awaited_in
from debug_hang.probe.source_lines import add_awaiting

pytestmark = pytest.mark.unit

VOCAB = ROOT / "tests" / "data" / "captures" / "async_setter_called_after_wait"


def edit_procs(role: str, edit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        for proc in doc["processes"]:
            if proc.get("role") == role and (role != "actor" or proc.get("awaiting")):
                edit(proc)
    return apply


def drop_later_calls(proc: dict[str, Any]) -> None:
    for thread in proc["threads"]:
        for frame in thread["frames"]:
            frame.pop("calls_after", None)


def test_the_driver_that_publishes_after_its_wait_is_the_culprit() -> None:
    # GIVEN the driver in iter_batches, the UDF actor in ray.get on LabelStore.vocab (awaiting, no
    # frame), and `store.publish.remote(...)` after the driver's current line
    diag = reanalyse(VOCAB)
    # THEN a program-order deadlock whose only culprit is the driver; the awaiting LabelStore is a victim
    assert diag.verdict == "hang"
    cause = diag.causes[0]
    assert cause.pattern == "set-order-deadlock"
    assert [c.kind for c in cause.culprits] == ["driver"]
    assert "LabelStore" in {diag.graph.nodes[v].class_name for v in cause.victims}
    closing = next(e for e in diag.graph.edges if e.why == "setter-call")
    assert not closing.guessed and "LabelStore.publish" in closing.evidence and "self.ready" in closing.evidence


def test_a_driver_that_calls_the_setter_before_its_wait_is_no_culprit(tmp_path: Path) -> None:
    # WHEN the driver's frame shows no call of publish after its line (it published before it waited)
    diag = reanalyse(capture_variant(tmp_path, VOCAB, edit_procs("driver", drop_later_calls)))
    # THEN no set-order deadlock: the await is one nothing resolves, in the actor
    cause = diag.causes[0]
    assert cause.pattern != "set-order-deadlock"
    assert [c.class_name for c in cause.culprits] == ["LabelStore"]


@pytest.mark.parametrize("fact", [
    pytest.param({"setters": []}, id="no-setter"),
    pytest.param({"setters": ["Other.publish:32"]}, id="a-setter-of-another-class"),
    pytest.param({"method": "LabelStore.other"}, id="read-for-another-method"),
])
def test_without_a_setter_of_the_running_calls_object_the_actor_stays_the_culprit(tmp_path: Path, fact: dict[str, Any]) -> None:
    # WHEN the source read shows no method of the actor's class setting what its running call awaits
    diag = reanalyse(capture_variant(tmp_path, VOCAB, edit_procs("actor", lambda p: p["awaiting"].update(fact))))
    cause = diag.causes[0]
    assert cause.pattern != "set-order-deadlock"
    assert [c.class_name for c in cause.culprits] == ["LabelStore"]


def test_the_probe_reads_what_an_async_method_awaits_and_who_sets_it(tmp_path: Path) -> None:
    src = tmp_path / "job.py"
    src.write_text(textwrap.dedent('''\
        import asyncio, ray

        @ray.remote
        class Store:
            def __init__(self):
                self.ready = asyncio.Event()
                self.fut = asyncio.get_event_loop().create_future()

            async def publish(self):
                self.ready.set()

            async def vocab(self):
                await self.ready.wait()

            async def timed(self):
                await asyncio.wait_for(self.ready.wait(), 5)

            async def result(self):
                return await self.fut

            def resolve(self):
                self.fut.set_result(1)

            async def never(self):
                await self.unset.wait()

        class Other:
            def publish(self):
                self.unset.set()
    '''))
    assert awaited_in(str(src), "Store", "vocab") == {
        "method": "Store.vocab", "file": str(src), "line": 13, "awaits": ["self.ready"], "setters": ["Store.publish:10"]}
    assert awaited_in(str(src), "Store", "timed")["setters"] == ["Store.publish:10"]  # type: ignore[index]
    assert awaited_in(str(src), "Store", "result")["setters"] == ["Store.resolve:22"]  # type: ignore[index]
    assert awaited_in(str(src), "Store", "never") is None  # only another class sets an attribute of that name
    assert awaited_in(str(src), "Store", "publish") is None  # awaits nothing
    assert awaited_in(str(src), "Missing", "vocab") is None

    # the node side: an actor whose threads show no job frame gets the reading of its running method
    loop = Thread(name="AsyncIO Thread: default", frames=[Frame("EpollSelector.select", "/usr/lib/python3.12/selectors.py", 468)])
    idle = Process(pid=None, title="ray::Store.vocab", threads=[loop])
    add_awaiting(idle, idle.title, [str(src)])
    assert idle.awaiting is not None and idle.awaiting["awaits"] == ["self.ready"]
    busy = Process(pid=None, title="ray::Store.vocab", threads=[Thread(frames=[Frame("Store.vocab", str(src), 13)])])
    add_awaiting(busy, busy.title, [str(src)])
    assert busy.awaiting is None  # its frame shows where it waits: the sync rule reads it
