"""Who could set an in-process synchronisation object, when the setter already ran.

Two real captures of red-team jobs (tests/data/captures/README.md):

- `asyncio_event_set_from_thread`: an async actor's `predict` awaits `self.loaded.wait()` (an
  asyncio.Event); `_load`, run by a `threading.Thread` started in `__init__`, called
  `self.loaded.set()` from that thread and ended. The wake-up went to the loop's ready queue
  without waking its selector (the loop idles in epoll with no timeout): the set call is the cause.
- `thread_local_ready_event`: a threaded actor's `act()` threads wait on `self._ready`, a property
  handing each thread its own Event from threading.local; `load_weights` set its own thread's and
  FINISHED after they started. A set Event stays set, so they wait on other objects: nothing can set
  them (event-never-set), the property is the culprit's line.
- `healthy_shared_ready_event_reload` (healthy twin): the waiters share one Event that a RUNNING
  reload (which clears it first) sets later: never hung.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.setters import awaited_in, set_facts

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
ASYNC_SET = CAPTURES / "asyncio_event_set_from_thread"
TLS = CAPTURES / "thread_local_ready_event"
TWIN = CAPTURES / "healthy_shared_ready_event_reload"
Doc = dict[str, Any]


def node_of(diag: Any, class_name: str) -> Any:
    return next(n for n in diag.graph.nodes.values() if n.class_name == class_name)


def actor_frames(cls: str, edit: Any) -> Any:
    def apply(doc: Doc) -> None:
        for proc in doc["processes"]:
            if proc.get("actor_class") == cls:
                edit(proc)
    return apply


# --- an asyncio object resolved from another thread -------------------------------------------

def test_an_asyncio_event_set_by_an_ended_thread_names_that_set_as_the_cause() -> None:
    # GIVEN ModelServer.predict RUNNING with no frame, its loop idle in epoll with no timeout, and
    # its source: predict awaits self.loaded, set only in _load, run by threading.Thread (gone)
    diag = reanalyse(ASYNC_SET)
    # THEN a hang of ModelServer whose line is the set in _load, named as a set from another thread
    assert diag.verdict == "hang"
    cause = diag.causes[0]
    assert cause.pattern == "async-await-stuck"
    assert [c.class_name for c in cause.culprits] == ["ModelServer"]
    node = node_of(diag, "ModelServer")
    assert (node.user_frame.function, node.user_frame.line) == ("ModelServer._load", 37)
    text = " ".join(node.evidence)
    assert "`self.loaded.set()` in ModelServer._load" in text and "without loop.call_soon_threadsafe" in text
    assert "run by Thread at line 31" in text


def test_a_setter_thread_still_running_is_not_named_as_the_cause(tmp_path: Path) -> None:
    # GIVEN the same readings, but a thread of the actor still inside ModelServer._load
    def loader_alive(proc: Doc) -> None:
        frame = {"function": "ModelServer._load", "file": proc["awaiting"]["file"], "line": 34, "native": False,
                 "code": "time.sleep(5)"}
        proc["threads"].append({"thread_id": "1", "os_thread_id": 4242, "name": "weight-loader", "active": False,
                                "owns_gil": False, "frames": [frame]})
    diag = reanalyse(capture_variant(tmp_path, ASYNC_SET, stacks=actor_frames("ModelServer", loader_alive)))
    # THEN its set is still to come: no set from another thread is claimed
    node = node_of(diag, "ModelServer")
    assert "call_soon_threadsafe" not in " ".join(node.evidence)
    assert node.user_frame is None or node.user_frame.line != 37


def test_a_set_that_runs_on_the_loop_too_is_not_named_as_a_set_from_a_thread(tmp_path: Path) -> None:
    # GIVEN the class also sets self.loaded in a coroutine (a setter run on the loop itself)
    def also_on_loop(proc: Doc) -> None:
        proc["awaiting"]["setters"].append("ModelServer.open:60")
    diag = reanalyse(capture_variant(tmp_path, ASYNC_SET, stacks=actor_frames("ModelServer", also_on_loop)))
    # THEN the cross-thread set is not the only way it is resolved: not claimed
    assert "call_soon_threadsafe" not in " ".join(node_of(diag, "ModelServer").evidence)


def test_the_probe_reads_which_setters_run_on_a_thread(tmp_path: Path) -> None:
    # GIVEN the job's source, and the same class fixed with call_soon_threadsafe
    job = ROOT / "redteam" / "asyncio_event_set_from_thread.py"
    found = awaited_in(str(job), "ModelServer", "predict")
    assert found is not None
    assert found["threads"] == ["ModelServer._load:37 self.loaded.set() via Thread:31"]
    fixed = tmp_path / "fixed.py"
    fixed.write_text(job.read_text().replace("self.loaded.set()", "self.loop.call_soon_threadsafe(self.loaded.set)"))
    assert "threads" not in (awaited_in(str(fixed), "ModelServer", "predict") or {})
    # a helper called by the thread's target, an executor, and a queue filled with put_nowait count too
    src = tmp_path / "pool.py"
    src.write_text(textwrap.dedent("""\
        import asyncio
        class Svc:
            def __init__(self, pool):
                self.done = asyncio.Event()
                self.q = asyncio.Queue()
                pool.submit(self._work)
            def _work(self):
                self._finish()
                self.q.put_nowait(1)
            def _finish(self):
                self.done.set()
            async def wait(self):
                await self.done.wait()
            async def take(self):
                return await self.q.get()
        """))
    assert (awaited_in(str(src), "Svc", "wait") or {}).get("threads") == ["Svc._finish:11 self.done.set() via submit:6"]
    assert (awaited_in(str(src), "Svc", "take") or {}).get("threads") == ["Svc._work:9 self.q.put_nowait() via submit:6"]


# --- an Event set on another object -------------------------------------------------------------

def test_waiters_on_a_per_thread_event_that_a_finished_call_set_elsewhere_are_hung() -> None:
    # GIVEN PolicyServer's two act() threads in Event.wait (no timeout) at `self._ready.wait()`, on two
    # different Events of the same PolicyServer, and load_weights (which sets self._ready on every
    # return, nothing clearing it) FINISHED after they started
    diag = reanalyse(TLS)
    # THEN nothing can set what they wait on: a hang of PolicyServer at the property that makes the Event
    assert diag.verdict == "hang"
    cause = diag.causes[0]
    assert cause.pattern == "event-never-set"
    assert [c.class_name for c in cause.culprits] == ["PolicyServer"]
    node = node_of(diag, "PolicyServer")
    assert (node.user_frame.function, node.user_frame.line) == ("PolicyServer._ready", 27)
    text = " ".join(node.evidence)
    assert "PolicyServer.load_weights FINISHED" in text and "on 2 different objects" in text
    assert "nothing seen calls it" not in text


def tls_tasks(state: str, end_ms: float | None = None) -> Any:
    def apply(rows: list[Doc]) -> None:
        for row in rows:
            if row.get("name") == "PolicyServer.load_weights":
                row["state"] = state
                if end_ms is not None or state != "FINISHED":
                    row["end_time_ms"] = end_ms
    return apply


@pytest.mark.parametrize("state", ["RUNNING", "PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY"])
def test_a_setting_call_still_running_or_queued_is_a_set_to_come(tmp_path: Path, state: str) -> None:
    # GIVEN the same readings, load_weights not finished but running or queued
    diag = reanalyse(capture_variant(tmp_path, TLS, tasks=tls_tasks(state)))
    # THEN its set may reach them: not hung by this rule
    assert node_of(diag, "PolicyServer").pattern != "event-never-set"
    assert diag.verdict != "hang"


def test_a_set_that_ended_before_the_waits_began_proves_nothing(tmp_path: Path) -> None:
    # GIVEN load_weights FINISHED before either act call started
    diag = reanalyse(capture_variant(tmp_path, TLS, tasks=tls_tasks("FINISHED", end_ms=1.0)))
    assert node_of(diag, "PolicyServer").pattern != "event-never-set"


def test_an_event_cleared_or_rebound_in_the_class_is_left_to_later_rounds(tmp_path: Path) -> None:
    # GIVEN the class's source also clears self._ready (a per-round Event)
    def cleared(proc: Doc) -> None:
        for thread in proc["threads"]:
            for frame in thread["frames"]:
                if frame.get("setters") and frame.get("facts"):
                    frame["facts"]["resets"] = "PolicyServer.reset:50"
    diag = reanalyse(capture_variant(tmp_path, TLS, stacks=actor_frames("PolicyServer", cleared)))
    assert node_of(diag, "PolicyServer").pattern != "event-never-set"
    assert diag.verdict != "hang"


def test_the_healthy_twin_with_a_running_reload_is_not_hung(tmp_path: Path) -> None:
    # GIVEN act() threads waiting on the one shared Event a RUNNING load_weights(2) clears and sets later
    assert reanalyse(TWIN).verdict != "hang"
    # and even read as if that reload had FINISHED: the Event is cleared per round (resets) - not decided so
    def finished(rows: list[Doc]) -> None:
        for row in rows:
            if row.get("name") == "PolicyServer.load_weights" and row.get("state") == "RUNNING":
                row["state"], row["end_time_ms"] = "FINISHED", 9.9e12
    diag = reanalyse(capture_variant(tmp_path, TWIN, tasks=finished))
    assert all(n.pattern != "event-never-set" for n in diag.graph.nodes.values())


def test_the_probe_reads_sure_sets_resets_and_the_property(tmp_path: Path) -> None:
    tls = str(ROOT / "redteam" / "thread_local_ready_event.py")
    assert set_facts(tls, 41) == {"sets_always": "PolicyServer.load_weights:36", "defined": "PolicyServer._ready:27"}
    twin = str(ROOT / "redteam" / "healthy_shared_ready_event_reload.py")
    assert set_facts(twin, 40) == {"sets_always": "PolicyServer.load_weights:35", "resets": "PolicyServer.load_weights:29"}
    src = tmp_path / "gate.py"
    src.write_text(textwrap.dedent("""\
        class Gate:
            def __init__(self, ev):
                self.ev = ev
            def maybe(self, ok):
                if ok:
                    self.ev.set()
            def early(self, ok):
                if not ok:
                    return
                self.ev.set()
            def swap(self, ev):
                self.ev = ev
            def wait(self):
                self.ev.wait()
        """))
    # a set under a branch or after an early return is not sure; a rebinding outside __init__ resets it
    assert set_facts(str(src), 14) == {"resets": "Gate.swap:12"}

