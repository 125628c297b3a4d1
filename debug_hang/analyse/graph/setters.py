"""Who calls the method that sets what an actor waits on: an actor thread in `self.X.wait()` that
nothing in its own process sets is released only by a later call of a method of its class that sets
X (read from its source on the node, probe/setters.py). The processes whose stack shows a frame
that makes that call after its current line are the ones to wait for; when such a caller itself
waits, down its chain, on this actor, it will make the call only after a wait that cannot end: a
deadlock through the caller's own program order, whose fix is in the caller (set-order-deadlock).

The same holds for an async actor whose RUNNING call shows no frame (a coroutine suspended in
`await` is invisible to a stack dump): the probe read that method of its class on the node
(`Process.awaiting`: the `self.X` it awaits, the methods that set X), and a process waiting on
the actor whose frame calls such a method after its current line closes the same cycle
(follow_async_setters, called by the async-await pass before it names the actor).

When the only setters of what the async call awaits run on a thread of the class (threading.Thread,
an executor) that no thread runs any more, and the loop sleeps with no timer, the set was made from
another thread without loop.call_soon_threadsafe: its wake-up never woke the loop (set_from_thread,
called by the same pass to name that call). An awaited `self.Q.join()` whose every task_done() of
the class a `continue`/`return`/`raise` of its loop can skip (not in a `finally`) leaks the queue's
unfinished count: the skipping statement is the culprit line (join_skipped)."""

from __future__ import annotations

import re

from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.threads import frame_text
from debug_hang.analyse.patterns import ProcessVerdict, is_library
from debug_hang.model import Frame

_NUMBERED = re.compile(r"^\s*(\d+):\s?(.*)$")
_ENTRY = re.compile(r"^(?P<name>[\w.<>]+):(?P<line>\d+)$")
# What can still run code that calls in: a process in a wait, busy, or not started yet.
_LIVE_STATES = frozenset({"blocked", "busy", "pending", "restarting", "starved", "unknown"})
_PARTIES = frozenset({"driver", "actor", "task", "process", "rank"})
MAX_NAMED = 4
MAX_FREE = 16  # callers not waiting on the actor that get a guessed edge (a job of many tasks)


def _entries(items: list[str] | None) -> list[tuple[str, int]]:
    return [(m.group("name"), int(m.group("line"))) for item in items or [] if (m := _ENTRY.match(item))]


def setter_methods(node: GNode, frame: Frame) -> dict[str, int]:
    """The methods of the actor's own class that set what the frame waits on: name -> line of the set."""
    return class_setters(node, frame.setters)


def class_setters(node: GNode, entries: list[str] | None) -> dict[str, int]:
    """Of setters read on the node (`Cls.m:line`), the methods of the actor's own class: name -> line."""
    out: dict[str, int] = {}
    for qualname, line in _entries(entries):
        cls, _, method = qualname.rpartition(".")
        if cls and cls.rsplit(".", 1)[-1] == node.class_name and "<locals>" not in qualname:
            out.setdefault(method, line)
    return out


def _later_calls(b: Builder) -> dict[str, dict[str, tuple[Frame, int]]]:
    """Per process, the methods its job frames call remotely after their current line: name ->
    (the first such frame, line of the call)."""
    out: dict[str, dict[str, tuple[Frame, int]]] = {}
    for key, verdict in b.verdicts.items():
        for thread, _m in verdict.threads:
            for frame in thread.frames:
                if frame.calls_after and not frame.native and not is_library(frame):
                    for name, line in _entries(frame.calls_after):
                        out.setdefault(key, {}).setdefault(name, (frame, line))
    return out


def _quoted(frame: Frame, line: int) -> str:
    text = next((m.group(2).strip() for item in frame.context or []
                 if (m := _NUMBERED.match(item)) and int(m.group(1)) == line), "")
    return f"{frame.short_file}:{line}" + (f" `{text}`" if text else "")


def _waiting_on(b: Builder, key: str) -> set[str]:
    """Every node that waits on `key` by facts, directly or down a chain."""
    seen: set[str] = set()
    todo = [key]
    while todo:
        for e in b.g.into(todo.pop()):
            if not e.guessed and e.src not in seen:
                seen.add(e.src)
                todo.append(e.src)
    return seen


@graph_pass(after=("detect_event_waits",))
def follow_event_setters(b: Builder) -> None:
    """An actor's event nothing in its process sets (event-never-set), whose class's setting
    methods the source shows: to the processes whose code calls one of them after their current
    line. A caller that waits (down its chain) on the actor closes a cycle (set-order-deadlock,
    the caller named); one that does not may still call it (a guessed edge: its own state decides).
    When no process shows such a call the reading stays, saying so."""
    later: dict[str, dict[str, tuple[Frame, int]]] | None = None
    parties: list[GNode] | None = None
    for key, verdict in b.verdicts.items():
        node = b.g.nodes[key]
        frame = verdict.main.user_frame if verdict.main is not None else None
        if node.pattern != "event-never-set" or node.kind != "actor" or frame is None or b.g.out(key) \
                or key in b.set_elsewhere:
            continue  # (a setting call that FINISHED set another object: no later call sets this one)
        methods = setter_methods(node, frame)
        if not methods:
            continue
        sets = ", ".join(f"{node.class_name}.{m} ({frame.short_file}:{line})" for m, line in sorted(methods.items()))
        where = frame_text(frame)
        later = _later_calls(b) if later is None else later
        callers: dict[str, tuple[Frame, int, str]] = {}
        for k, calls in later.items():
            method = next((m for m in sorted(methods) if m in calls and k != key), None)
            if method is not None:
                callers[k] = (*calls[method], method)
        if not callers:
            parties = _parties(b) if parties is None else parties
            free = _not_waiting(b, key, parties)
            node.evidence.append(
                f"what it waits on is set only by {sets}; nothing seen calls it: no stack of the job's processes shows a "
                "frame that calls it after its current line" + (
                    f"; {', '.join(n.label() for n in free)} does not wait on this actor and could still call it"
                    if free else ""))
            continue
        node.pattern = "event-wait"
        waiting = _waiting_on(b, key)
        beyond = [k for k in sorted(callers) if k not in waiting][MAX_FREE:]
        for k, (site, line, method) in sorted(callers.items()):
            if k in beyond:
                continue
            waits_back = k in waiting
            caller = b.g.nodes[k].label()
            if waits_back:
                b.g.add_edge(key, k, "setter-call",
                             f"waits at {where}, set only by {sets}; {caller} calls {node.class_name}.{method} only after "
                             f"the wait it is in at {frame_text(site)} ({_quoted(site, line)}), a wait on this actor")
            else:
                b.g.add_edge(key, k, "setter-call",
                             f"waits at {where}, set only by {sets}; {caller} calls {node.class_name}.{method} after its "
                             f"current line ({_quoted(site, line)}) and does not wait on this actor: it may still call it",
                             guessed=True)
        node.evidence.append(f"waits at {where}; what it waits on is set only by {sets}, which "
                             + ", ".join(b.g.nodes[k].label() for k in sorted(callers)) + " call(s) after their current line")


def _parties(b: Builder) -> list[GNode]:
    """The job's live processes that could call in, the driver first."""
    out = [n for k, n in b.g.nodes.items() if n.kind in _PARTIES and n.state in _LIVE_STATES and k in b.verdicts]
    return sorted(out, key=lambda n: (n.kind != "driver", n.key))


def free_parties(b: Builder, key: str) -> list[GNode]:
    """The job's live processes (but `key`) that do not wait on `key`, down their chain: those
    that could still call in (the first MAX_NAMED)."""
    return _not_waiting(b, key, _parties(b))


def _not_waiting(b: Builder, key: str, parties: list[GNode]) -> list[GNode]:
    """The first MAX_NAMED of `parties` (but `key`) that do not wait, down their chain, on `key`."""
    waiting = _waiting_on(b, key)
    out: list[GNode] = []
    for n in parties:
        if n.key != key and n.key not in waiting:
            out.append(n)
            if len(out) == MAX_NAMED:
                break
    return out


def follow_async_setters(b: Builder, key: str, verdict: ProcessVerdict, doing: str) -> bool:
    """An async actor with an idle loop whose RUNNING call awaits a `self.X` of its class (read
    from its source, `Process.awaiting`) that only methods of its class set: when a process that
    waits on this actor, down its chain, makes a call of such a method after its current line,
    it makes it only once that wait ends - a cycle through its program order (a `setter-call`
    edge to it, set-order-deadlock). True when it added one (the actor is then no culprit)."""
    node, facts = b.g.nodes[key], verdict.process.awaiting
    running = {str(t.name) for t in b.running.get(key, [])}
    if not isinstance(facts, dict) or _tail(str(facts.get("method", ""))) not in {_tail(n) for n in running}:
        return False  # read for another call than the one running
    methods = class_setters(node, [str(x) for x in facts.get("setters") or []])
    if not methods:
        return False
    waiting = _waiting_on(b, key)
    callers: dict[str, tuple[Frame, int, str]] = {}
    for k, calls in _later_calls(b).items():
        setter = next((m for m in sorted(methods) if m in calls), None)
        if setter is not None and k != key and k in waiting:
            callers[k] = (*calls[setter], setter)
    if not callers:
        return False
    short = str(facts.get("file", "")).rsplit("/", 1)[-1]
    awaits = ", ".join(str(x) for x in facts.get("awaits") or [])
    where = f"{short}:{facts.get('line')} ({awaits})"
    sets = ", ".join(f"{node.class_name}.{m} ({short}:{line})" for m, line in sorted(methods.items()))
    node.state = "blocked"
    for k, (site, line, method) in sorted(callers.items()):
        b.g.add_edge(key, k, "setter-call",
                     f"{doing} awaits at {where}, set only by {sets}; {b.g.nodes[k].label()} calls "
                     f"{node.class_name}.{method} only after the wait it is in at {frame_text(site)} "
                     f"({_quoted(site, line)}), a wait on this actor")
    node.evidence.append(
        f"{doing} RUNNING with no frame (a coroutine suspended in await), its event loop idle; its source awaits "
        f"{awaits} at {short}:{facts.get('line')}, set only by {sets}, which "
        + ", ".join(b.g.nodes[k].label() for k in sorted(callers)) + " call(s) only after a wait on this actor")
    return True


def _tail(name: str) -> str:
    """`Class.method` of a qualified name or task name (`Outer.Store.vocab` -> `Store.vocab`)."""
    return ".".join(name.split(".")[-2:])


_THREADED = re.compile(r"^(?P<where>[\w.<>]+):(?P<line>\d+) (?P<call>.+) via (?P<how>[\w.]+):(?P<at>\d+)$")


def set_from_thread(b: Builder, key: str, verdict: ProcessVerdict) -> str:
    """An async actor whose RUNNING call awaits a `self.X` of its class (`Process.awaiting`) that
    only a function run on a thread of the class (threading.Thread, an executor, to_thread) sets,
    while that function runs on no thread in any sample (it ended) and the loop sleeps with no
    timer: asyncio objects are not thread-safe - a set()/set_result()/put_nowait() from another
    thread queues the waiters' wake-up with call_soon without waking the loop's selector, so the
    await never resumes. The culprit frame becomes that call; returns the evidence ("" when not so)."""
    facts = verdict.process.awaiting
    if not isinstance(facts, dict):
        return ""
    running = {_tail(str(t.name)) for t in b.running.get(key, [])}
    if _tail(str(facts.get("method", ""))) not in running:
        return ""
    found = [m for m in (_THREADED.match(str(x)) for x in facts.get("threads") or []) if m]
    if not found or len(found) != len(facts.get("setters") or []):
        return ""  # another setter runs on the loop itself: it may still come
    node = b.g.nodes[key]
    samples = b.inp.samples.get(node.ref) or [verdict.process]
    live = {f.function.rsplit(".", 1)[-1] for proc in samples for t in proc.threads for f in t.frames if not f.native}
    if any(m.group("where").rsplit(".", 1)[-1] in live for m in found):
        return ""  # the setter still runs: its set is still to come
    first = found[0]
    short = str(facts.get("file", "")).rsplit("/", 1)[-1]
    node.user_frame = Frame(function=first.group("where"), file=str(facts.get("file") or ""),
                            line=int(first.group("line")), code=first.group("call"))
    choose(node, "asyncio_set_from_thread")
    sets = ", ".join(f"`{m.group('call')}` in {m.group('where')} ({short}:{m.group('line')}, run by "
                     f"{m.group('how')} at line {m.group('at')})" for m in found)
    awaits = ", ".join(str(x) for x in facts.get("awaits") or [])
    return (f"it awaits {awaits} ({short}:{facts.get('line')}), resolved only by {sets}: a function run on another "
            "thread, which no thread of the process runs now (it ended, in every sample). An asyncio object is not "
            "thread-safe: resolved from another thread without loop.call_soon_threadsafe, it queues the waiters' "
            "wake-up with call_soon but does not wake the loop, which sleeps in its selector with no timer - the "
            "await never resumes, even once the object is set. Fix: "
            f"`loop.call_soon_threadsafe({first.group('call').removesuffix('()')})` with the loop read in an async "
            "method (asyncio.get_running_loop()), or a threading.Event awaited with asyncio.to_thread")


_JOIN = re.compile(r"^(?P<queue>[\w.]+):(?P<line>\d+)(?: (?P<code>.+))?$")
_DONE = re.compile(r"^(?P<where>[\w.<>]+):(?P<line>\d+) (?P<call>\S+)(?: skipped by (?P<kind>\w+):(?P<at>\d+)| (?P<final>in finally))?$")


def join_skipped(b: Builder, key: str, verdict: ProcessVerdict) -> str:
    """An async actor whose RUNNING call awaits `self.Q.join()` (`Process.awaiting`, read from its
    class's source): join returns only once every item got is marked task_done(). When each
    task_done() of the class on that queue can be skipped - a `continue`/`break`/`return`/`raise`
    of its loop body above it, on a path that has not called it, and it is not in a `finally` - an
    item got on that path is never marked: the unfinished count stays above zero, join never
    returns. The culprit frame becomes the skipping statement; returns the evidence ("" when not so:
    a task_done in a finally, or one no exit skips, is no cause)."""
    facts = verdict.process.awaiting
    if not isinstance(facts, dict) or not facts.get("joins"):
        return ""
    running = {_tail(str(t.name)) for t in b.running.get(key, [])}
    if _tail(str(facts.get("method", ""))) not in running:
        return ""
    dones = [m for m in (_DONE.match(str(x)) for x in facts.get("task_done") or []) if m]
    if not dones or any(m.group("kind") is None for m in dones):
        return ""  # a task_done every path reaches (or one in a finally): the count can reach zero
    join = _JOIN.match(str((facts.get("joins") or [""])[0]))
    short = str(facts.get("file", "")).rsplit("/", 1)[-1]
    first = dones[0]
    node = b.g.nodes[key]
    node.user_frame = Frame(function=first.group("where"), file=str(facts.get("file") or ""),
                            line=int(first.group("at")), code=first.group("kind"))
    choose(node, "asyncio_task_done_skipped")
    joined = (f"`{join.group('code') or join.group('queue') + '.join()'}` ({short}:{join.group('line')})"
              if join else "a queue's join()")
    skips = "; ".join(f"`{m.group('call')}` in {m.group('where')} ({short}:{m.group('line')}) is skipped on the "
                      f"`{m.group('kind')}` at line {m.group('at')}" for m in dones)
    return (f"it is suspended at {joined}, which returns only once every item got is marked task_done(): join waits for "
            f"unfinished items that are never marked - {skips}, not in a `finally`: each item got on that path leaks "
            "the queue's unfinished count, which never reaches zero (the queue may be empty, its consumer idle in "
            "get()). Fix: call task_done() in a `finally` of the consumer loop")
