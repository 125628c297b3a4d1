"""An actor call that never returns: every call of the actor waited on needs it to end.

A sync actor runs one call at a time (a threaded one, max_concurrency at a time). A method whose
own loop has no exit - no `break`, `return` or `raise` in it, so only an exception from a call it
makes can end it - holds its slot for good: a call queued behind it never starts, and a wait on
the call itself never ends. Its loop may be alive (it logs, writes, counts rounds); that is work
for the loop, not for whoever waits: what they wait for needs the method to return.

The rule fires only when, in every sample, every thread of the actor that runs one of its calls
is inside such a loop of that call's method frame, a call is queued behind them and a waiter
waits on the actor (a wait on the endless call alone may be meant to last: a driver that serves
until it is killed).
Async actors are left to their own rules (an awaiting coroutine shows in no thread).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.inprocess import is_event_loop
from debug_hang.analyse.graph.model import QUEUED_STATES
from debug_hang.analyse.graph.raycalls import runs_actor_call
from debug_hang.analyse.patterns import is_library
from debug_hang.model import Frame, Process, Thread
from debug_hang.rows import TaskRow

if TYPE_CHECKING:
    from debug_hang.analyse.busy import LoopShape


def method_frame(thread: Thread, task: TaskRow) -> Frame | None:
    """The frame of `task`'s method on the thread: the outermost job frame, named as the task is."""
    name = str(task.name or "")
    outer = [f for f in reversed(thread.frames) if not f.native and not is_library(f)]
    if outer and outer[0].function in (name, name.rsplit(".", 1)[-1]):
        return outer[0]
    return None


def _endless_frame(thread: Thread, task: TaskRow) -> tuple[Frame, LoopShape] | None:
    """The outermost job frame of `task`'s method, or of a function it calls, inside a loop with
    no exit: that frame never returns, so neither does the method."""
    from debug_hang.analyse.busy import exitless_loop  # busy reads the graph's types: imported here

    if method_frame(thread, task) is None:
        return None
    for frame in reversed(thread.frames):
        loop = exitless_loop(frame) if not frame.native and not is_library(frame) else None
        if loop is not None:
            return frame, loop
    return None


def _endless_in_every_sample(samples: list[Process], thread: Thread, task: TaskRow) -> tuple[Frame, str] | None:
    """The frame and its loop's header when the thread is inside that exitless loop in every
    sample (the same function, a line within the same loop)."""
    tid = thread.os_thread_id or thread.thread_id
    first: tuple[Frame, str, int, int] | None = None
    for sample in samples:
        then = next((t for t in sample.threads if (t.os_thread_id or t.thread_id) == tid), None)
        found = _endless_frame(then, task) if then is not None else None
        if found is None:
            return None
        frame, loop = found
        if first is None:
            first = (frame, loop.text, loop.header, loop.end)
        elif frame.function != first[0].function or not first[2] <= (frame.line or 0) < first[3]:
            return None
    return (first[0], first[1]) if first is not None else None


@graph_pass(after=("follow_edges",), decides=("endless-call-holds-actor",))
def mark_endless_calls(b: Builder) -> None:
    """An actor waited on whose every running call is in a loop with no exit (endless-call-holds-actor)."""
    for key, node in b.g.nodes.items():
        verdict = b.verdicts.get(key)
        running = b.running.get(key, [])
        if verdict is None or node.kind != "actor" or not running or not b.g.into(key):
            continue
        queued = [t for t in b.tasks if t.actor_id == node.actor_id and t.state in QUEUED_STATES]
        if not queued:
            continue  # a wait on the endless call alone may be meant to last (a driver serving until killed)
        if any(is_event_loop(t) for t in verdict.process.threads):
            continue
        callers = [t for t in verdict.process.threads if runs_actor_call(t)]
        samples = b.inp.samples.get(node.ref) or [verdict.process]
        held: list[tuple[TaskRow, Frame, str]] = []
        for thread in callers:
            task = next((t for t in running if method_frame(thread, t) is not None), None)
            found = _endless_in_every_sample(samples, thread, task) if task is not None else None
            if found is None:
                break
            held.append((task, *found))  # type: ignore[arg-type]
        if not held or len(held) != len(callers):
            continue
        node.pattern = "endless-call-holds-actor"
        for task, frame, header in held:
            node.evidence.append(
                f"{task.name} never returns: its loop `{header}` ({frame.short_file}:{frame.line}) has no break, return "
                f"or raise, and it was inside it in all {len(samples)} sample(s): only an exception can end it")
        names = ", ".join(sorted({str(t.name) for t in queued})[:3])
        node.evidence.append(f"{len(queued)} call(s) queued behind it on the same actor ({names}) cannot start "
                             "until it returns: its loop's own activity is no progress for them")
        node.frame = held[0][1]
