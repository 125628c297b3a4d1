"""An async actor's call that hands its work to a thread of its class and awaits a Future that
thread resolves by posting to a loop (graph/loops.py, graph/queues.py, probe/setters.py).

The capture is the red-team job `redteam/async_callback_to_init_loop.py`, recorded live
(tests/data/captures/README.md): Embedder.embed puts `(fut, text)` into `self._requests` and
awaits `fut`; the callback thread `embed-cb` resolves it with
`self._loop.call_soon_threadsafe(fut.set_result, vec)`, `self._loop = asyncio.new_event_loop()`
from __init__, a loop no thread runs (Ray runs the calls on its own "AsyncIO Thread: default").
The three calls stay at `await fut` (no frame), the callback thread idles at `self._requests.get()`.
"""

from __future__ import annotations

import json
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

EMBED = ROOT / "tests" / "data" / "captures" / "async_future_posted_to_init_loop"
Doc = dict[str, Any]


def embedder(edit: Callable[[Doc], None]) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        for proc in doc["processes"]:
            if proc.get("actor_class") == "Embedder":
                edit(proc)
    return apply


def node_of(diag: Any, name: str) -> Any:
    return next(n for n in diag.graph.nodes.values() if n.name == name)


def test_a_future_resolved_through_a_loop_made_in_init_is_a_loop_not_running() -> None:
    # GIVEN 3 Embedder.embed calls RUNNING with no frame, the callback thread idle at
    # `self._requests.get()`, only Ray's loop thread running a loop, and the class's source:
    # embed puts into self._requests then awaits fut; the callback posts to self._loop = new_event_loop()
    diag = reanalyse(EMBED)
    # THEN the loop nothing runs is the cause, at the line that makes it; no producer is gone
    assert diag.verdict == "hang"
    cause = diag.causes[0]
    assert cause.pattern == "async-loop-not-running"
    assert [c.class_name for c in cause.culprits] == ["Embedder"]
    node = node_of(diag, "Embedder")
    assert node.user_frame is not None and node.user_frame.function == "Embedder.__init__"
    assert node.user_frame.line == 30 and "new_event_loop" in (node.user_frame.code or "")
    assert any("AsyncIO Thread: default" in e for e in node.evidence)
    assert all(n.pattern != "producer-gone" for n in diag.graph.nodes.values())


def test_without_the_loop_it_posts_to_the_putter_in_flight_is_no_gone_producer(tmp_path: Path) -> None:
    # GIVEN the same readings, but the source shows no loop of the class made with new_event_loop()
    case = capture_variant(tmp_path, EMBED, stacks=embedder(lambda p: p["awaiting"].update(loops=[], posts=[])))
    diag = reanalyse(case)
    # THEN the queue's putter is the call in flight that already put: not producer-gone; the
    # wait is on its await, which nothing here decides: inconclusive
    assert diag.verdict == "inconclusive"
    node = node_of(diag, "Embedder")
    assert node.pattern == "queue-get-wait"
    assert any("the producer is not gone" in e for e in node.evidence)


def test_without_the_source_reading_suspended_calls_are_live_putters(tmp_path: Path) -> None:
    # GIVEN the readings the tool had in round 9: no reading of the running method's source
    case = capture_variant(tmp_path, EMBED, stacks=embedder(lambda p: p.update(awaiting=None)))
    diag = reanalyse(case)
    # THEN the 3 embed calls, coroutines suspended with no frame, may still put: no gone producer
    assert diag.verdict == "inconclusive"
    node = node_of(diag, "Embedder")
    assert node.pattern == "queue-get-wait"
    assert any("no producer is known to be gone" in e for e in node.evidence)


def test_a_thread_of_the_job_running_a_loop_may_run_that_one(tmp_path: Path) -> None:
    # GIVEN a job thread (not Ray's) that runs an event loop, as `Thread(target=self._loop.run_forever)` would
    def add_loop_thread(proc: Doc) -> None:
        ray_loop = next(t for t in proc["threads"] if t.get("name") == "AsyncIO Thread: default")
        proc["threads"].append(json.loads(json.dumps(ray_loop)) | {"name": "Thread-2 (run_forever)", "os_thread_id": 999,
                                                                    "thread_id": "999"})
    diag = reanalyse(capture_variant(tmp_path, EMBED, stacks=embedder(add_loop_thread)))
    # THEN the loop posted to may be running: not async-loop-not-running
    assert all(c.pattern != "async-loop-not-running" for c in diag.causes)
    assert node_of(diag, "Embedder").pattern != "producer-gone"


def test_the_probe_reads_a_handoff_to_a_thread_and_the_loop_it_posts_to(tmp_path: Path) -> None:
    src = tmp_path / "job.py"
    src.write_text(textwrap.dedent('''\
        import asyncio, queue, threading

        class Embedder:
            def __init__(self):
                self._loop = asyncio.new_event_loop()
                self._requests = queue.Queue()

            def _callback_thread(self):
                fut, text = self._requests.get()
                self._loop.call_soon_threadsafe(fut.set_result, text)

            async def embed(self, text):
                fut = asyncio.get_running_loop().create_future()
                self._requests.put((fut, text))
                return await fut

            async def plain(self):
                await asyncio.sleep(1)
    '''))
    found = awaited_in(str(src), "Embedder", "embed")
    assert found is not None
    assert found["puts"] == ["self._requests:14"] and found["pending"] == ["fut:15"]
    assert found["loops"] == ["Embedder.__init__:5 self._loop = asyncio.new_event_loop()"]
    assert found["posts"] == ["Embedder._callback_thread:10 self._loop"]
    assert awaited_in(str(src), "Embedder", "plain") is None
    # the node side: another thread running job code (the callback thread) does not hide the
    # running method's reading; a thread in that method's own frame does
    loop = Thread(name="AsyncIO Thread: default", frames=[Frame("EpollSelector.select", "/usr/lib/python3.12/selectors.py", 468)])
    cb = Thread(name="embed-cb", frames=[Frame("Queue.get", "/usr/lib/python3.12/queue.py", 171),
                                         Frame("Embedder._callback_thread", str(src), 9)])
    proc = Process(pid=None, title="ray::Embedder.embed", threads=[loop, cb])
    add_awaiting(proc, proc.title, [str(src)])
    assert proc.awaiting is not None and proc.awaiting["posts"] == ["Embedder._callback_thread:10 self._loop"]
    busy = Process(pid=None, title="ray::Embedder.embed", threads=[Thread(frames=[Frame("Embedder.embed", str(src), 14)])])
    add_awaiting(busy, busy.title, [str(src)])
    assert busy.awaiting is None
