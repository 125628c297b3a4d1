"""Who in the same process can release what a thread waits on, decided from the objects waited on.

A dump read with locals gives each frame's facts (debug_hang/facts.py): the identity of the
object each frame works on (`self`), of the Event, Condition or Future a wait frame waits on,
and the `with` blocks a job frame is inside or entering. One address is one live object of the
process, so the facts tie threads together exactly:

- a lock, at its `with` line (the `enters` fact): released by the thread inside a `with` block on
  the same lock (the same expression over the same `self`: the `with` fact);
- an Event, Condition, Semaphore or Barrier: by the other threads that hold the waited object or
  work on an object the waiter's job frames work on (the same `self`), and do not wait on it;
- a Future (Future.result, futures.wait, as_completed): by the thread-pool workers running a job
  (a job queued in the pool needs one of them free: `_worker`'s `work_queue` names the pool), an
  event loop (run_coroutine_threadsafe), or a thread holding that Future;
- a thread (Thread.join): by that thread (the joined Thread object's identity).

Following these edges from the thread that decides a process's reading ends at a thread nothing
in the process releases (it spins, or waits on something outside: a Ray call, a socket, a child),
whose reading then stands for the process; or it comes back round: the threads wait on each other
(locks taken in opposite order or held across the wait, a pool whose every worker waits on work
queued behind it). Without facts (an older capture, a dump without locals) nothing is decided here.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.threads import deciding_thread, frame_text, other_threads_in_job_code
from debug_hang.analyse.patterns import ProcessVerdict, ThreadMatch, catalog, is_library, match_thread, settings
from debug_hang.facts import identities_in, parse_identity
from debug_hang.model import Frame, Thread

WaitKind = Literal["lock", "event", "condition", "semaphore", "barrier", "future", "join"]

# A wait frame of the standard library and what it waits on (the most specific, outermost first:
# Event.wait, Future.result and Semaphore.acquire all wait inside Condition.wait).
_THREADING = re.compile(r"(^|/)threading\.py$")
_FUTURES = re.compile(r"concurrent/futures/_base\.py$")
_POOL = re.compile(r"concurrent/futures/thread\.py$")
_ASYNCIO = re.compile(r"asyncio/base_events\.py$")
_WAIT_FRAMES: tuple[tuple[re.Pattern[str], re.Pattern[str], WaitKind, str], ...] = (
    (_FUTURES, re.compile(r"^(Future\.)?(result|exception)$"), "future", "self"),
    (_FUTURES, re.compile(r"^(wait|as_completed)$"), "future", "fs"),
    (_THREADING, re.compile(r"^(Event\.)?wait$"), "event", "self"),
    (_THREADING, re.compile(r"^(Barrier\.)?wait$"), "barrier", "self"),
    (_THREADING, re.compile(r"^((Bounded)?Semaphore\.)?acquire$"), "semaphore", "self"),
    (_THREADING, re.compile(r"^(Thread\.)?(join|_wait_for_tstate_lock)$"), "join", "self"),
    (_THREADING, re.compile(r"^(Condition\.)?(wait|wait_for)$"), "condition", "self"),
)
_PRIORITY: dict[str, int] = {"condition": 0, "event": 1, "semaphore": 2, "barrier": 2, "join": 2, "future": 3, "lock": 4}
# A Condition.wait on `x` releases the lock of `with x:` around it.
_WAIT_CALL = re.compile(r"(?:^|[=\s(])(?:await\s+)?(?P<recv>[\w.]+)\.(wait|wait_for)\(")


@dataclass
class Wait:
    """What one idle thread waits on: the objects (identities, or lock keys) and where."""

    thread: Thread
    kind: WaitKind
    objects: list[str]
    frame: Frame  # the frame that shows the wait (a `with` line, Event.wait, Future.result)
    where: Frame | None  # the job's innermost frame on that stack (quoted in the report)


@dataclass
class ThreadEdge:
    src: Thread
    dst: Thread
    kind: WaitKind
    text: str
    inferred: bool = False  # by elimination (the only possible holder), not by the lock's identity


@dataclass
class ThreadGraph:
    """One process's threads, their waits, and which thread can release which."""

    verdict: ProcessVerdict
    waits: dict[int, Wait] = field(default_factory=dict)  # id(thread) -> its wait
    edges: dict[int, list[ThreadEdge]] = field(default_factory=dict)  # id(thread) -> who releases it
    matches: dict[int, ThreadMatch] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)  # the process's node-side readings

    def runs(self, thread: Thread) -> bool:
        return runs(thread, self.info)

    def out(self, thread: Thread) -> list[ThreadEdge]:
        return self.edges.get(id(thread), [])

    def add(self, src: Thread, dst: Thread, kind: WaitKind, text: str, inferred: bool = False) -> None:
        if not any(e.dst is dst for e in self.out(src)):
            self.edges.setdefault(id(src), []).append(ThreadEdge(src, dst, kind, text, inferred))


@dataclass
class Resolution:
    """Where the waits of one thread lead inside its process."""

    start: Thread
    path: list[ThreadEdge]  # start -> end, or start -> into the cycle and round it
    end: Thread | None  # the thread nothing in the process releases; None when every way comes back
    cycle: list[ThreadEdge] = field(default_factory=list)
    dormant: list[Thread] = field(default_factory=list)  # idle event loops the ways also end at


def name_of(thread: Thread) -> str:
    return str(thread.name or thread.os_thread_id or thread.thread_id or "?")


def python_frames(thread: Thread) -> list[Frame]:
    return [f for f in thread.frames if not f.native]


def owners(thread: Thread) -> set[str]:
    """The objects a thread works on: the `self` of its job frames (library frames excluded:
    Ray's wrappers hold every actor method's `self`)."""
    out: set[str] = set()
    for frame in python_frames(thread):
        value = (frame.facts or {}).get("self")
        if isinstance(value, str) and parse_identity(value) and not is_library(frame):
            out.add(value)
    return out


def held_identities(thread: Thread) -> set[str]:
    """Every identity any frame of the thread holds (arguments and locals)."""
    out: set[str] = set()
    for frame in python_frames(thread):
        for value in (frame.facts or {}).values():
            out.update(identities_in(value))
    return out


def lock_key(expr: str, frame: Frame) -> str:
    """One lock's name across threads: `self._lock` in a frame whose self is `Svc@0x1` is
    `Svc@0x1._lock`; a local holding the lock is its identity; anything else (a module global)
    is the expression as written in that file."""
    expr = expr.strip()
    head, _, rest = expr.partition(".")
    value = (frame.facts or {}).get(head)
    if isinstance(value, str) and parse_identity(value):
        return value + (f".{rest}" if rest else "")
    return f"{frame.file}:{expr}"


def _split(text: object) -> list[str]:
    return [part.strip() for part in str(text).split(";") if part.strip()] if text else []


def runs(thread: Thread, info: dict[str, Any] | None) -> bool:
    """The thread really runs: py-spy marks it active (a flag that flickers under load) and the
    node saw it on a CPU or queued for one most of the window (probe/schedstat.py: true of a spin
    at any load); without per-thread readings, its process used real CPU."""
    if not thread.active:
        return False
    readings = (info or {}).get("threads")
    if isinstance(readings, dict) and thread.os_thread_id is not None:
        mine = readings.get(str(thread.os_thread_id))
        return isinstance(mine, dict) and float(mine.get("runnable", 0.0)) >= settings().spin_runnable_percent
    cpu = (info or {}).get("cpu_percent")
    return cpu is None or float(cpu) >= settings().busy_cpu_percent



def wait_of(thread: Thread, info: dict[str, Any] | None = None) -> Wait | None:
    """What an idle thread waits on, from its innermost frames' facts (None: no fact tells)."""
    if runs(thread, info):
        return None
    frames = python_frames(thread)
    if not frames or frames[0].facts is None:
        return None
    where = next((f for f in frames if not is_library(f)), None)
    if not is_library(frames[0]) and "enters" in frames[0].facts:
        # Blocked taking a lock: py-spy shows no frame for the take, only the `with` line.
        keys = [lock_key(e, frames[0]) for e in _split(frames[0].facts["enters"])]
        return Wait(thread, "lock", keys, frames[0], frames[0])
    # The library frames above the job's code, innermost first: the outermost wait among them
    # says what is waited on (futures.wait waits in an Event.wait, which waits in Condition.wait).
    found: Wait | None = None
    for frame in frames:
        if not is_library(frame):
            break
        for file_re, fn_re, kind, local in _WAIT_FRAMES:
            if file_re.search(frame.file) and fn_re.search(frame.function):
                objects = identities_in((frame.facts or {}).get(local))
                if objects and (found is None or _PRIORITY[kind] >= _PRIORITY[found.kind]):
                    found = Wait(thread, kind, objects, frame, where)
                break
    if found is not None and found.kind == "semaphore" and where is not None and "enters" in (where.facts or {}):
        # `with self._sem:`: held by the threads inside a block on it, like a lock.
        found.objects = [lock_key(e, where) for e in _split((where.facts or {})["enters"])] + found.objects
    return found


def held_locks(thread: Thread, wait: Wait | None) -> dict[str, Frame]:
    """The locks (`with` blocks) a thread is inside, by lock key, and the frame holding each; a
    Condition waited on is released while it waits."""
    released = set()
    if wait is not None and wait.kind == "condition" and wait.where is not None:
        call = _WAIT_CALL.search(wait.where.code or "")
        if call:
            released.add(lock_key(call.group("recv"), wait.where))
    held: dict[str, Frame] = {}
    for frame in python_frames(thread):
        for expr in _split((frame.facts or {}).get("with")) + library_holds(frame):
            key = lock_key(expr, frame)
            if key not in released:
                held.setdefault(key, frame)
    return held


# Frames of the standard library that hold a lock of their own object while they call out, and
# the lock: logging's Handler.handle takes the handler's `self.lock` (`self.acquire()`, or `with
# self.lock:` from 3.13) around `self.emit(record)`, StreamHandler.flush around the stream's flush.
# A subclass whose emit takes that same lock again (its own `self.lock = threading.Lock()` replaces
# the handler's RLock) waits for a lock its own thread holds a frame below.
_LIBRARY_HOLDS: tuple[tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str], str], ...] = (
    (re.compile(r"(^|/)logging/__init__\.py$"), re.compile(r"^(Handler\.)?handle$"),
     re.compile(r"^self\.emit\(record\)$"), "self.lock"),
    (re.compile(r"(^|/)logging/__init__\.py$"), re.compile(r"^(StreamHandler\.)?flush$"),
     re.compile(r"^self\.stream\.flush\(\)$"), "self.lock"),
)


def library_holds(frame: Frame) -> list[str]:
    """The lock expressions a library frame holds at its line (over its `self`): only at the line
    that is inside the take (its source shown), never guessed from the function alone."""
    if not is_library(frame) or not frame.code or not isinstance((frame.facts or {}).get("self"), str):
        return []
    return [expr for file_re, fn_re, code_re, expr in _LIBRARY_HOLDS
            if file_re.search(frame.file) and fn_re.search(frame.function) and code_re.search(frame.code.strip())]


def pool_of(thread: Thread) -> str | None:
    """The work queue of a ThreadPoolExecutor worker (one per pool: its identity), if it is one."""
    for frame in python_frames(thread):
        if _POOL.search(frame.file) and frame.function.endswith("_worker"):
            value = (frame.facts or {}).get("work_queue")
            return value if isinstance(value, str) and parse_identity(value) else "?"
    return None


def pool_running(thread: Thread) -> bool:
    """A pool worker running a job (a _WorkItem.run frame above _worker), not idle on its queue."""
    return any(_POOL.search(f.file) and f.function.endswith("run") and "_WorkItem" in f.function
               for f in python_frames(thread))


def is_event_loop(thread: Thread) -> bool:
    """An asyncio event loop's thread (its frames, or Ray's name for an async actor's loop thread
    when py-spy shows only Thread.run)."""
    return any(_ASYNCIO.search(f.file) for f in python_frames(thread)) or str(thread.name or "").startswith("AsyncIO Thread")


def loop_timer(thread: Thread) -> str | None:
    """What an idle event loop's `_run_once` says of its timers (its `timeout` local): none
    scheduled (no asyncio.sleep or wait_for timeout pending: only I/O or another call wakes it),
    or the next one due."""
    value = _loop_timeout(thread)
    if value == "None":
        return "with no timer scheduled (no asyncio.sleep or wait_for timeout pending)"
    due = timer_due(thread)
    return f"its next timer due in {due:.3g}s" if due is not None else None


def timer_due(thread: Thread) -> float | None:
    """In how many seconds an idle asyncio loop's next timer is due (an asyncio.sleep, a wait_for
    timeout, a call_later), from `_run_once`'s `timeout` local; None when none is or it was not read."""
    value = _loop_timeout(thread)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# The system calls an idle event loop sleeps in, by machine, and which argument is its timeout in
# milliseconds (-1: none): epoll_wait, epoll_pwait and poll on x86_64, epoll_pwait on aarch64.
_POLL_TIMEOUT_ARG: dict[str, dict[int, int]] = {"x86_64": {232: 3, 281: 3, 7: 2}, "aarch64": {22: 3}}


def loop_poll_timeout_ms(thread: Thread, info: dict[str, Any] | None) -> int | None:
    """The timeout an event-loop thread passed to the epoll/poll call it sleeps in (the node's
    `loop_syscalls`, read after the last sample): -1 when no timer is due, else the milliseconds to
    the next one. The loop computes it from its timers whatever it is written in (uvloop's C loop
    as well as asyncio's); None when not read or not such a call."""
    calls = (info or {}).get("loop_syscalls") or {}
    found = calls.get(str(thread.os_thread_id)) if thread.os_thread_id is not None else None
    arg = _POLL_TIMEOUT_ARG.get(str((info or {}).get("machine")), {})
    try:
        index = arg.get(int(found[0])) if found else None
        if index is None or found is None:
            return None
        value = int(found[1 + index], 16) & 0xFFFFFFFF
    except (ValueError, IndexError, TypeError):
        return None
    return value - (1 << 32) if value >= 1 << 31 else value  # an int argument: its low 32 bits, signed


def _loop_timeout(thread: Thread) -> object:
    frame = next((f for f in python_frames(thread) if _ASYNCIO.search(f.file) and f.function.endswith("_run_once")), None)
    return (frame.facts or {}).get("timeout") if frame is not None else None


_PROCESS_POOL = re.compile(r"concurrent/futures/process\.py$")


def is_process_pool_manager(thread: Thread) -> bool:
    """A ProcessPoolExecutor's manager thread: it waits on the worker processes, not in this one."""
    return any(_PROCESS_POOL.search(f.file) and "_ExecutorManagerThread" in f.function for f in python_frames(thread))


def thread_graph(verdict: ProcessVerdict, info: dict[str, Any] | None = None) -> ThreadGraph | None:
    """The in-process edges of one process (`info`: what its node read of it); None when its
    last dump has no facts."""
    if not any(f.facts is not None for t, _m in verdict.threads for f in t.frames):
        return None
    cat = catalog()
    graph = ThreadGraph(verdict, info=info or {})
    live = []
    for thread, match in verdict.threads:
        match = graph.matches[id(thread)] = _weighed(graph, thread, match)
        benign = match.pattern != "unknown" and cat[match.pattern].kind == "benign" and not pool_running(thread)
        if not benign:
            live.append(thread)
        wait = wait_of(thread, info)
        if wait is not None:
            graph.waits[id(thread)] = wait
    locks = {id(t): held_locks(t, graph.waits.get(id(t))) for t in live}
    for thread in live:
        wait = graph.waits.get(id(thread))
        if wait is None:
            continue
        if wait.kind in ("lock", "semaphore"):
            _lock_edges(graph, thread, wait, live, locks)
        if wait.kind in ("event", "condition", "semaphore", "barrier"):
            _setter_edges(graph, thread, wait, live)
        elif wait.kind == "future":
            _future_edges(graph, thread, wait, [t for t, _m in verdict.threads])
        elif wait.kind == "join":
            _join_edges(graph, thread, wait, [t for t, _m in verdict.threads])
    _sole_holder_edges(graph, live, locks)
    return graph


def _reaches(graph: ThreadGraph, src: Thread, dst: Thread) -> bool:
    seen, todo = {id(src)}, [src]
    while todo:
        for edge in graph.out(todo.pop()):
            if edge.dst is dst:
                return True
            if id(edge.dst) not in seen:
                seen.add(id(edge.dst))
                todo.append(edge.dst)
    return False


_LOCK_KEY = re.compile(r"^(?P<type>[\w.]+)@(?P<addr>0x[0-9a-f]+)\.(?P<attr>.+)$")


def _another_instance(a: str, b: str) -> bool:
    """Two lock keys that are the same attribute of two objects of one class (`Cache@0x1._lock`,
    `Cache@0x2._lock`): each object's own lock, not one lock shared."""
    ma, mb = _LOCK_KEY.match(a), _LOCK_KEY.match(b)
    return bool(ma and mb and ma["type"] == mb["type"] and ma["attr"] == mb["attr"] and ma["addr"] != mb["addr"])


def _sole_holder_edges(graph: ThreadGraph, live: list[Thread], locks: dict[int, dict[str, Frame]]) -> None:
    """A thread waiting to take a lock whose holder no identity names (the dump shows `self.x` of
    two objects, not which Lock each attribute is): when exactly one other thread of the process
    holds any lock, no third thread runs job code, and that holder itself cannot go on - it waits,
    through its own threads, on the waiter (a join of the waiting thread inside its `with` block),
    or for a lock it holds itself - the lock is the holder's (or nobody's: the waiter is stuck
    either way). An edge to it, marked as inferred; the lock's identity is never guessed by name."""
    for thread in live:
        wait = graph.waits.get(id(thread))
        if wait is None or wait.kind != "lock" or any(e.kind == "lock" for e in graph.out(thread)):
            continue
        holders = [t for t in live if t is not thread and locks.get(id(t))]
        if len(holders) != 1:
            continue
        holder = holders[0]
        if any(t is not holder for t in other_threads_in_job_code(graph.verdict, thread)):
            continue
        if all(_another_instance(key, held) for key in wait.objects for held in locks[id(holder)]):
            continue  # the same attribute of another object of the same class: its own lock, by identity
        stuck = _reaches(graph, holder, thread) or any(e.kind == "lock" and e.dst is holder for e in graph.out(holder))
        if not stuck:
            continue
        frame = next(iter(locks[id(holder)].values()))
        graph.add(thread, holder, "lock",
                  f"{name_of(holder)} is the only other thread of this process holding a lock (inside "
                  f"{frame_text(frame)}), and it cannot go on: the dump does not name the Lock object behind each "
                  "attribute, so the lock this thread waits for is that one (or one no live thread holds)", inferred=True)


def _weighed(graph: ThreadGraph, thread: Thread, match: ThreadMatch) -> ThreadMatch:
    """A thread's reading, weighed by whether it runs: a reading that needs CPU (the catalog's
    `cpu: busy`, a spin read from py-spy's flickering active flag) of a thread the node did not
    see run is re-read as idle, as analysis._match_with_cpu does for a whole process."""
    pattern = catalog().get(match.pattern) if match.pattern != "unknown" else None
    if pattern is None or pattern.cpu != "busy" or graph.runs(thread):
        return match
    return match_thread(dataclasses.replace(thread, active=False))


def _lock_edges(graph: ThreadGraph, thread: Thread, wait: Wait, live: list[Thread],
                locks: dict[int, dict[str, Frame]]) -> None:
    for other in live:
        for key in wait.objects:
            frame = locks.get(id(other), {}).get(key)
            if frame is None:
                continue
            where = (f"inside {frame_text(frame)}, which holds that same object's lock around its call"
                     if is_library(frame) else f"inside the `with` block of {frame_text(frame)}")
            graph.add(thread, other, "lock", f"{name_of(other)} holds it: {where}"
                      + (" (this same thread, further up its stack)" if other is thread else ""))


def _setter_edges(graph: ThreadGraph, thread: Thread, wait: Wait, live: list[Thread]) -> None:
    """The threads that could set or notify what `thread` waits on: those holding the waited
    object, or working on an object the waiter's job frames work on, and not waiting on it."""
    mine = owners(thread)
    for other in live:
        if other is thread:
            continue
        theirs = graph.waits.get(id(other))
        if theirs is not None and set(theirs.objects) & set(wait.objects):
            continue  # waits on it too: a peer, not a setter
        holds = held_identities(other) & set(wait.objects)
        shared = owners(other) & mine
        if holds or shared:
            why = (f"holds {sorted(holds)[0]}" if holds else f"works on the same {sorted(shared)[0].split('@')[0]}")
            graph.add(thread, other, wait.kind, f"{name_of(other)} could set it: it {why}")


def _future_edges(graph: ThreadGraph, thread: Thread, wait: Wait, threads: list[Thread]) -> None:
    """A Future is completed by the pool job that runs it (a worker running a job, or one to
    come free for a queued job), an event loop (run_coroutine_threadsafe), or a thread holding it."""
    for other in threads:
        if other is thread:
            continue
        theirs = graph.waits.get(id(other))
        if theirs is not None and theirs.kind == "future" and set(theirs.objects) & set(wait.objects):
            continue
        if pool_of(other) and pool_running(other):
            graph.add(thread, other, "future", f"{name_of(other)} is a pool worker running a job (a Future is "
                      "completed by the job that runs it, or a queued job once a worker is free)")
        elif is_event_loop(other):
            graph.add(thread, other, "future", f"{name_of(other)} is an event loop (it completes the futures of "
                      "run_coroutine_threadsafe and run_in_executor)")
        elif is_process_pool_manager(other):
            graph.add(thread, other, "future", f"{name_of(other)} manages a process pool (it completes the pool's "
                      "futures as its worker processes finish their jobs)")
        elif held_identities(other) & set(wait.objects):
            graph.add(thread, other, "future", f"{name_of(other)} holds the Future {wait.objects[0]}")


_THREAD_RUNNER = re.compile(r"^(Thread\.)?(_bootstrap|_bootstrap_inner|run)$|\._bootstrap(_inner)?$")


def _join_edges(graph: ThreadGraph, thread: Thread, wait: Wait, threads: list[Thread]) -> None:
    """A join waits for the thread whose Thread object it joins: the `self` of that thread's
    threading bootstrap frames (the same identity); a thread whose bootstrap frames show no `self`
    is never matched by its name."""
    for other in threads:
        if other is thread:
            continue
        runners = [f for f in python_frames(other)
                   if _THREAD_RUNNER.search(f.function) and (f.function.endswith("_bootstrap") or _THREADING.search(f.file))]
        if any((f.facts or {}).get("self") in wait.objects for f in runners):
            graph.add(thread, other, "join", f"it joins {name_of(other)}")


def resolve(graph: ThreadGraph, start: Thread) -> Resolution | None:
    """Follow the edges from `start`: the best thread where they end, or the cycle they make.
    None when `start` waits on nothing another thread of its process releases."""
    if not graph.out(start):
        return None
    parents: dict[int, ThreadEdge | None] = {id(start): None}
    order = [start]
    for thread in order:  # breadth first: the nearest end wins among equals
        for edge in graph.out(thread):
            if id(edge.dst) not in parents:
                parents[id(edge.dst)] = edge
                order.append(edge.dst)
    ends = [t for t in order if not graph.out(t) and _end_rank(graph, t) < DORMANT]
    if ends:
        end = min(ends, key=lambda t: (_end_rank(graph, t), order.index(t)))
        return Resolution(start, _path(parents, end), end)
    # Every way comes back, or ends at an idle event loop (whose awaiting coroutines py-spy
    # cannot show): nothing in the process moves.
    dormant = [t for t in order if not graph.out(t)]
    return Resolution(start, [], None, _cycle(graph, start), dormant)


DORMANT = 3  # the rank of an idle event loop: an end that explains nothing by itself


def _end_rank(graph: ThreadGraph, thread: Thread) -> int:
    """Which end explains a wait best: a thread that runs (spins or computes), then one waiting
    on something outside the process, then any other; an idle event loop is DORMANT."""
    match = graph.matches.get(id(thread))
    pattern = catalog().get(match.pattern) if match is not None and match.pattern != "unknown" else None
    if graph.runs(thread):
        return 0
    if (is_event_loop(thread) and (pattern is None or pattern.kind == "benign")) or is_process_pool_manager(thread):
        return DORMANT  # what it waits on is out of sight: coroutines, worker processes
    if pattern is not None and pattern.kind != "benign":
        return 1
    return 2


def _path(parents: dict[int, ThreadEdge | None], end: Thread) -> list[ThreadEdge]:
    path: list[ThreadEdge] = []
    edge = parents.get(id(end))
    while edge is not None:
        path.append(edge)
        edge = parents.get(id(edge.src))
    return list(reversed(path))


def _cycle(graph: ThreadGraph, start: Thread) -> list[ThreadEdge]:
    """The edges among the threads `start` reaches (each of them waits on another of them)."""
    seen = {id(start)}
    todo = [start]
    edges: list[ThreadEdge] = []
    while todo:
        for edge in graph.out(todo.pop()):
            edges.append(edge)
            if id(edge.dst) not in seen:
                seen.add(id(edge.dst))
                todo.append(edge.dst)
    return edges


def describe(graph: ThreadGraph, thread: Thread) -> str:
    """`thread worker-1 waits in Event.wait (Event@0x..) at Svc.wait (svc.py:12) `self.done.wait()``."""
    wait = graph.waits.get(id(thread))
    match = graph.matches.get(id(thread))
    if wait is None:
        frame = match.user_frame or match.frame if match is not None else None
        state = "runs" if graph.runs(thread) else "is idle"
        return f"thread {name_of(thread)} {state} at {frame_text(frame or next(iter(python_frames(thread)), None))}"
    what = ", ".join(wait.objects[:3])
    return (f"thread {name_of(thread)} waits in {wait.frame.function} ({wait.kind} {what}) at "
            f"{frame_text(wait.where or wait.frame)}")


@graph_pass(after=("add_last_calls",))
def follow_threads(b: Builder) -> None:
    """Each process's wait followed through its own threads, by identity: the reading of the
    thread it ends at stands for the process (a spinning setter is a busy loop; a lock holder in
    ray.get is followed there); cycles are left to the mechanism that names them (locks, pools)."""
    for key, verdict in b.verdicts.items():
        graph = thread_graph(verdict, b.inp.info.get(verdict.process.ref))
        start = deciding_thread(verdict)
        if graph is None or start is None:
            continue
        b.thread_graphs[key] = graph
        found = resolve(graph, start)
        if found is None:
            _waiters_of(b, key, graph, start)
            continue
        b.in_process[key] = found
        if found.end is not None:
            _stand_for(b, key, graph, found)


MAX_WAITERS_SHOWN = 3


def _waiters_of(b: Builder, key: str, graph: ThreadGraph, end: Thread) -> None:
    """The deciding thread waits on nothing in its process (it spins, or waits outside): the
    threads whose waits end at it, and what ties them to it, as evidence. Its reading stays the
    process's; this says why the waiting calls wait (the act() calls on a Condition whose only
    notifier is this thread)."""
    waiters = [(t, found) for t, _m in graph.verdict.threads
               if t is not end and (found := resolve(graph, t)) is not None and found.end is end]
    if not waiters:
        return
    node = b.g.nodes[key]
    node.evidence.append(f"{describe(graph, end)}; {len(waiters)} thread(s) of this process wait on it:")
    for thread, found in waiters[:MAX_WAITERS_SHOWN]:
        node.evidence.append(f"  {describe(graph, thread)}")
        node.evidence.extend(f"    → {edge.text}" for edge in found.path)
    if len(waiters) > MAX_WAITERS_SHOWN:
        node.evidence.append(f"  and {len(waiters) - MAX_WAITERS_SHOWN} more thread(s) the same way")
    if graph.runs(end):
        node.evidence.append(_cpu_text(graph, end))


def _cpu_text(graph: ThreadGraph, thread: Thread) -> str:
    mine = (graph.info.get("threads") or {}).get(str(thread.os_thread_id))
    if isinstance(mine, dict):
        return (f"thread {name_of(thread)} was on a CPU or queued for one {mine.get('runnable'):.0f}% of the window "
                f"(on a CPU {mine.get('cpu'):.0f}%: the node's other load takes the rest): it spins")
    return f"thread {name_of(thread)} is active in the dump and its process uses real CPU"


def _stand_for(b: Builder, key: str, graph: ThreadGraph, found: Resolution) -> None:
    """The end thread's reading becomes the process's: what it does is why the others wait."""
    end = found.end
    assert end is not None
    match = graph.matches[id(end)]
    node = b.g.nodes[key]
    pattern = catalog().get(match.pattern) if match.pattern != "unknown" else None
    running = graph.runs(end)
    if pattern is not None and pattern.kind == "benign" and not running:
        return  # an idle loop or housekeeping thread explains nothing
    node.evidence.append(f"{describe(graph, found.start)}")
    for edge in found.path:
        node.evidence.append(f"  → {edge.text}")
    node.evidence.append(f"{describe(graph, end)}" + (f" ({match.pattern})" if match.pattern != "unknown" else ""))
    node.frame, node.user_frame = match.frame, match.user_frame
    b.deciding[key] = end
    if running and (pattern is None or pattern.id == "busy-loop"):
        node.pattern, node.state = "busy-loop", "busy"
        node.evidence.append(_cpu_text(graph, end))
    elif pattern is not None:
        node.pattern, node.state = pattern.id, "blocked"
    else:
        node.pattern, node.state = None, "unknown"
