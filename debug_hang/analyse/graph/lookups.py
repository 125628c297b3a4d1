"""Polls for a named actor: a loop that retries `ray.get_actor(name)` waits for whoever could create
that actor, and when every party that could create it waits on the poller, the poll closes a cycle."""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.threads import deciding_thread, frame_text, other_threads_in_job_code
from debug_hang.analyse.patterns import is_library
from debug_hang.model import Frame

# A named lookup in the poll's loop: ray.get_actor(name[, namespace=...]) raises ValueError until
# an actor of that name exists.
_LOOKUP = re.compile(r"\bget_actor\s*\(\s*(?P<name>[^)]*?)\s*\)")
# A line that creates a named actor: `.options(..., name=...)` (or get_if_exists=...).
_CREATES_NAMED = re.compile(r"\.options\s*\((?=[^#]*\b(name|get_if_exists)\s*=)")
_NUMBERED = re.compile(r"^\s*(\d+):\s?(.*)$")
# A name written as a string literal (or an f-string) in a lookup or a creation.
_NAME_LITERAL = re.compile(r"""^(?P<f>[fF]?)(?P<q>["'])(?P<text>[^"']*)(?P=q)$""")
_NAME_ARG = re.compile(r"""\bname\s*=\s*(?P<name>[fF]?(["'])[^"']*\2)""")
# What can still run code that creates an actor: a process in a wait, busy, or not started yet.
_LIVE_STATES = frozenset({"blocked", "busy", "pending", "restarting", "starved", "unknown"})
_PARTIES = frozenset({"driver", "actor", "task", "process", "rank"})
MAX_FREE = 16  # parties not waiting on a poll that its guessed edges lead to


def _lines(frame: Frame) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in frame.context or []:
        m = _NUMBERED.match(item)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def _lookup_in_loop(b: Builder, key: str) -> tuple[Frame, str] | None:
    """The job frame of a poll loop whose source looks an actor up by name, and that lookup's
    argument text; None when the poll tests something else."""
    node, verdict = b.g.nodes[key], b.verdicts.get(key)
    if node.pattern != "poll-never-satisfied" or verdict is None or verdict.main is None:
        return None
    frame = verdict.main.user_frame
    if frame is None or is_library(frame):
        return None
    thread = b.deciding.get(key) or deciding_thread(verdict)
    if other_threads_in_job_code(verdict, thread):
        return None  # another thread of the poller may create it itself
    for text in _lines(frame).values():
        m = _LOOKUP.search(text)
        if m:
            return frame, m.group("name") or "?"
    return None


def _name_pattern(text: str) -> re.Pattern[str] | None:
    """What names a literal or f-string in the source can stand for (each `{...}` any text); None
    when the name is computed (a variable, a call): it could be any."""
    m = _NAME_LITERAL.match(text.split(",")[0].strip())
    if m is None:
        return None
    if not m.group("f"):
        return re.compile(re.escape(m.group("text")) + "$")
    parts = re.split(r"\{[^}]*\}", m.group("text"))
    return re.compile(".*".join(re.escape(p) for p in parts) + "$")


def _same_name(looked_up: str, created: str) -> bool:
    """Whether a lookup and a creation may name the same actor: both written out and
    incompatible (`f"{run}-config"` against `"exp7-cache"`) is a no; unknown either side, a maybe."""
    wanted, made = _name_pattern(looked_up), _NAME_LITERAL.match(created.strip())
    if wanted is None or made is None or made.group("f"):
        return True
    return wanted.match(made.group("text")) is not None


def _creation_line(b: Builder, key: str, looked_up: str) -> str | None:
    """A line of the party's own code, after the line it waits at, that creates a named actor
    whose name may be the one looked up: the creation its wait keeps it from reaching (read from
    the source the dump shows)."""
    verdict = b.verdicts.get(key)
    thread = (b.deciding.get(key) or deciding_thread(verdict)) if verdict is not None else None
    for frame in thread.frames if thread is not None else []:
        if frame.native or is_library(frame) or not frame.line:
            continue
        for number, text in sorted(_lines(frame).items()):
            if number <= frame.line or not _CREATES_NAMED.search(text):
                continue
            named = _NAME_ARG.search(text)
            if named is None or _same_name(looked_up, named.group("name")):
                return f"{frame.short_file}:{number} `{text.strip()}`"
    return None


def _parties(b: Builder, pollers: set[str]) -> list[GNode]:
    """The job's other processes and unstarted calls that could still run code: an idle actor runs
    nothing until called, a dead one never again."""
    return [n for k, n in b.g.nodes.items() if k not in pollers and n.kind in _PARTIES and n.state in _LIVE_STATES]


def _waits_on(b: Builder, start: str) -> set[str]:
    """Every node `start` waits on by facts (guessed edges left out), directly or down a chain."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for e in b.g.out(todo.pop()):
            if not e.guessed and e.dst not in seen:
                seen.add(e.dst)
                todo.append(e.dst)
    return seen


@graph_pass(after=("follow_polls_to_restarted_actors", "edges_supervisors", "detect_async_await"),
            decides=("named-actor-wait",))
def follow_named_lookups(b: Builder) -> None:
    """A poll loop around `ray.get_actor(name)` waits for the actor to be created, by another party
    of the job. Those parties decide: one that does not wait on the pollers may still create it
    (the poll waits on it, a guess: its own state decides); when every one waits on the pollers
    (transitively) and one's next lines create a named actor, the poll and that wait form a cycle
    whose creator is where the order must change (create-order-deadlock). When none shows the
    creation the poll is a wait on an unknown creator, not a condition proven never to come."""
    polls = {key: found for key in b.verdicts if (found := _lookup_in_loop(b, key)) is not None}
    if not polls:
        return
    pollers = set(polls)
    parties = _parties(b, pollers)
    if not parties:
        return  # nobody of the job could create it: the poll itself is the cause (a wrong name or namespace)
    waiting = [n for n in parties if _waits_on(b, n.key) & pollers]
    # The driver first, then the others: at most MAX_FREE of them get an edge (a job of many tasks).
    free = sorted((n for n in parties if n not in waiting), key=lambda n: (n.kind != "driver", n.key))[:MAX_FREE]
    names = sorted({name for _, name in polls.values()})
    creators = {n.key: line for n in waiting
                if (line := next(filter(None, (_creation_line(b, n.key, name) for name in names)), None))}
    for key, (frame, name) in polls.items():
        node = b.g.nodes[key]
        node.pattern = "named-actor-wait"
        where = f"its loop at {frame_text(frame)} looks up the actor `{name}` by name (ray.get_actor) and sleeps"
        if free:
            node.evidence.append(f"{where}: it waits for that actor to be created; "
                                 f"{', '.join(n.label() for n in free[:4])} may still create it")
            for other in free:
                b.g.add_edge(key, other.key, "named-actor-wait",
                             f"polls ray.get_actor({name}) until the actor exists: probably created by {other.label()}, "
                             "which does not wait on the poll", guessed=True)
        elif creators:
            node.evidence.append(f"{where}: every other party of the job that could create it waits on this poll")
            for dst, line in creators.items():
                b.g.add_edge(key, dst, "named-actor-wait",
                             f"polls ray.get_actor({name}) until the actor exists, and {b.g.nodes[dst].label()} creates a "
                             f"named actor only after its wait ({line}), a wait on this poll")
        else:
            node.evidence.append(f"{where}: every other party of the job waits on this poll and none shows a line "
                                 "creating a named actor after its wait: who should create it is not shown")
