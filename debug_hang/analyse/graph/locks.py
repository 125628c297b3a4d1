"""Lock waits: lock order across threads, a lock nobody else can hold, library locks held across
a wait, and OS file locks (/proc/locks) to the process that holds them."""

from __future__ import annotations

import re
from typing import Any

from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, follows, graph_pass
from debug_hang.analyse.graph.inprocess import ThreadEdge, describe
from debug_hang.analyse.graph.model import GNode, WaitGraph
from debug_hang.analyse.graph.semlocks import mark_ended_semlock_holders
from debug_hang.analyse.graph.sockets import ray_linked, socket_peers_of
from debug_hang.analyse.graph.threads import deciding_thread, frame_text, other_threads_in_job_code
from debug_hang.analyse.patterns import ProcessVerdict, catalog, is_library
from debug_hang.analyse.progress import rules
from debug_hang.model import Frame, ProcessRef, Thread
from debug_hang.untrusted import one_line


@graph_pass(after=("follow_threads", "detect_import_lock_waits"),
            decides=("lock-order-deadlock", "logging-lock-deadlock", "lock-self-deadlock", "lock-abandoned"))
def detect_lock_waits(b: Builder) -> None:
    """Lock waits read across the threads of one process: by the lock's holder when the dump's
    facts name it, else lock order, or a lock nobody else holds."""
    for key, verdict in b.verdicts.items():
        if b.g.nodes[key].pattern == "import-lock-deadlock":
            continue  # decided by its import lock (imports.py)
        if _detect_file_lock_self(b, key) or _detect_db_lock_self(b, key) or _detect_lock_cycle(b, key) \
                or _detect_known_holder(b.g.nodes[key], verdict):
            continue
        _detect_lock_order(b.g.nodes[key], verdict)
        _detect_lock_self(b.g.nodes[key], verdict, b)


@follows("lock-holder")
def follow_lock_holder(b: Builder, key: str) -> None:
    """A wait for an OS file lock: to the process /proc/locks names as its holder (same node)."""
    _edges_file_locks_of(b, key)


def _detect_lock_cycle(b: Builder, key: str) -> bool:
    """Threads of one process that wait on each other round a lock whose holder the facts name
    (inprocess.py): a thread taking a lock it holds itself (lock-self-deadlock), or a cycle of
    waits with a lock in it (lock-order-deadlock: locks in opposite order, or a lock held across
    a wait for a thread that must take it first)."""
    found = b.in_process.get(key)
    if found is None or found.end is not None or not any(e.kind == "lock" for e in found.cycle):
        return False
    graph = b.thread_graphs[key]
    node = b.g.nodes[key]
    own = next((e for e in found.cycle if e.kind == "lock" and e.src is e.dst), None)
    edges = [own] if own is not None else _ring(found.cycle)
    # A join inside a `with` block on the lock the joined thread waits for: the joiner's line is
    # the one that holds the lock across the wait (the thread it joins cannot end without it).
    joiner = next((e for e in edges if e.kind == "join"), None)
    # One lock in the ring, its holder waiting on something else (a queue, a Future, a condition):
    # the holder's wait is the line that holds the lock across it, whoever waits for the lock.
    holder = _holder_across_wait(edges) if joiner is None and own is None else None
    first = graph.waits.get(id((joiner or holder or edges[0]).src))
    node.pattern, node.state = ("lock-self-deadlock" if own is not None else "lock-order-deadlock"), "blocked"
    if first is not None:
        node.frame = node.user_frame = first.where or first.frame
    for edge in edges:
        node.evidence.append(f"{describe(graph, edge.src)}; {edge.text}")
    if own is None:
        node.evidence.append("each of these threads waits for the next, the last for the first: none can go on")
        if joiner is not None:
            node.evidence.append(
                f"thread {joiner.src.name or joiner.src.os_thread_id} joins {joiner.dst.name or joiner.dst.os_thread_id} "
                "while it holds the lock that thread waits for: only the joiner can release it, and it will not until the "
                "joined thread ends (a library's join counts: QueueListener.stop, ThreadPoolExecutor.shutdown(wait=True))")
    else:
        victims = [e for e in found.cycle if e is not own and e.dst is own.src]
        for edge in victims[:3]:
            node.evidence.append(f"{describe(graph, edge.src)}: a victim, it waits for the deadlocked thread "
                                 f"{own.src.name or own.src.os_thread_id} ({edge.text})")
    return True


def _holder_across_wait(edges: list[ThreadEdge]) -> ThreadEdge | None:
    """The wait of the thread holding the ring's only lock, when that wait is no lock wait (it
    waits, holding the lock, for a thread that needs the lock first); None otherwise."""
    locks = [e for e in edges if e.kind == "lock"]
    if len(locks) != 1:
        return None
    held = next((e for e in edges if e.src is locks[0].dst), None)
    return held if held is not None and held.kind != "lock" else None


def _ring(edges: list[ThreadEdge]) -> list[ThreadEdge]:
    """The edges of one cycle among `edges`, in order (from a lock edge when there is one)."""
    out: dict[int, list[ThreadEdge]] = {}
    for edge in edges:
        out.setdefault(id(edge.src), []).append(edge)
    start = next((e for e in edges if e.kind == "lock"), edges[0])
    ring, seen = [start], {id(start.src)}
    while id(ring[-1].dst) not in seen and out.get(id(ring[-1].dst)):
        seen.add(id(ring[-1].dst))
        nxt = out[id(ring[-1].dst)]
        ring.append(next((e for e in nxt if id(e.dst) in seen), nxt[0]))
    return ring


def _detect_known_holder(node: GNode, verdict: ProcessVerdict) -> bool:
    """A library lock whose holders the catalog knows (a graph pattern with `holds`): one thread
    waits for it at the pattern's frames while another thread of the process is inside a frame
    that holds it, itself blocked: the lock is held across that wait (logging-lock-deadlock)."""
    for pattern in catalog().values():
        if not pattern.holds or pattern.detect != "graph":
            continue
        waiter = next(((t, f) for t, _m in verdict.threads for f in t.frames
                       if not f.native and any(r.matches(f) for r in pattern.frames)), None)
        if waiter is None:
            continue
        holder = next(((t, m, f) for t, m in verdict.threads if t is not waiter[0] for f in t.frames
                       if not f.native and any(r.matches(f) for r in pattern.holds)), None)
        if holder is None:
            continue
        thread, match, frame = holder
        node.pattern, node.state = pattern.id, "blocked"
        node.frame, node.user_frame = waiter[1], None
        node.evidence.append(f"thread {waiter[0].name or waiter[0].os_thread_id} waits for the lock at "
                             f"{frame_text(waiter[1])}")
        node.evidence.append(f"thread {thread.name or thread.os_thread_id} holds it: it is inside {frame_text(frame)}, "
                             f"which keeps it taken, and waits at {frame_text(match.frame)}"
                             + (f" ({match.pattern})" if match.pattern != "unknown" else ""))
        return True
    return False


def _detect_lock_order(node: GNode, verdict: ProcessVerdict) -> None:
    """Two or more threads of one process idle at different lock lines: a lock-order deadlock."""
    waits = [(t, m) for t, m in verdict.threads if m.pattern == "lock-wait" and m.frame is not None and not t.active]
    lines = {(m.frame.file, m.frame.line) for _, m in waits if m.frame is not None}
    if len(waits) < 2 or len(lines) < 2:
        return
    node.pattern = "lock-order-deadlock"
    node.state = "blocked"
    for thread, match in waits[:4]:
        frame = match.user_frame or match.frame
        node.evidence.append(f"thread {thread.name or thread.os_thread_id} waits at {frame_text(frame)}")


# What runs a thread's or an actor call's code, and holds none of the job's locks: Ray's task
# machinery, threading's and a thread pool's bootstrap.
_CALL_MACHINERY = re.compile(r"(^|/)(ray/_private/|ray/util/tracing/|threading\.py$|concurrent/futures/thread\.py$)")


def _mark_lock_abandoned(node: GNode, waiter: Thread, frame: Frame) -> None:
    """The waiting thread has no frame above its wait that could hold the lock (only the machinery
    that runs its code), and no other thread of the process can: the lock was left taken by a
    thread that has ended, or a call that returned, without releasing it (lock-abandoned)."""
    node.pattern, node.state = "lock-abandoned", "blocked"
    node.evidence.append(
        f"thread {waiter.name or waiter.os_thread_id} waits to take the lock at {frame_text(frame)}; no frame above it "
        "on its stack could hold it (only the machinery that runs the call), and no other thread of this process runs "
        "job code: no live thread holds it")
    node.evidence.append(
        "the lock was left taken by a thread that ended, or a call that returned, without releasing it (acquire() "
        "without `with` or try/finally, an exception in between): a thread that died left its traceback in the "
        "worker's .err log (Exception in thread ...)")


_MP_LOCK = re.compile(r"(^|/)multiprocessing/synchronize\.py$")
_MP_HELPER_CHILD = re.compile(r"multiprocessing\.(resource_tracker|forkserver)|from multiprocessing\.(resource_tracker|forkserver) import")


def _live_children_sharing(b: Builder, verdict: ProcessVerdict, frames: list[Frame]) -> list[int]:
    """The live child processes of the waiting process when the lock it waits for is a
    multiprocessing one (a SemLock frame on its stack): such a lock lives in shared memory, so
    a child forked with it can hold it; the lock is left taken only when no such child is alive."""
    if not any(_MP_LOCK.search(f.file) for f in frames):
        return []
    proc = verdict.process
    out = []
    for (node_id, pid), info in b.inp.info.items():
        if info.get("child_of") != proc.pid or node_id != proc.node_id or _MP_HELPER_CHILD.search(str(info.get("title") or "")):
            continue
        states = info.get("run_state")
        if isinstance(states, list) and states and (states[-1] is None or all(s == "Z" for s in states)):
            continue  # exited in the window, or a zombie: it holds nothing
        out.append(int(pid or 0))
    return out


# Functions run as finalisers: by the garbage collector or when a last reference is dropped.
_FINALISER = re.compile(r"(__del__|finaliz|_callback|callback)$|weakref")


def _detect_lock_self(node: GNode, verdict: ProcessVerdict, b: Builder | None = None) -> None:
    """One thread waits to take a lock and no other thread of the process runs job code: nobody
    else can hold it — the waiting thread holds it itself (re-entry from __del__ or a callback),
    or a thread ended without releasing it. A forked child is left to _edges_children (there
    the lock was copied locked by fork)."""
    if node.pattern != "lock-wait" or verdict.main is None or verdict.process.role == "child":
        return
    frame = verdict.main.frame  # a lock-wait reading: a lock take (its `with`/acquire line, or a library's lock by name)
    if frame is None:
        return
    waiter = deciding_thread(verdict)
    if waiter is None:
        return
    others = other_threads_in_job_code(verdict, waiter)
    if others:
        return
    frames = [f for f in waiter.frames if not f.native]
    at = next((i for i, f in enumerate(frames) if f is frame), 0)
    finaliser = next((f for f in frames[at:] if _FINALISER.search(f.function)), None)
    if finaliser is None and all(_CALL_MACHINERY.search(f.file) for f in frames[at + 1:]):
        shared = _live_children_sharing(b, verdict, frames) if b is not None else []
        if shared:
            node.evidence.append(
                f"thread {waiter.name or waiter.os_thread_id} waits to take a multiprocessing lock at "
                f"{frame_text(frame)}; no thread of this process holds it, but a multiprocessing lock is shared with "
                f"the processes forked from it, and child pid {', '.join(map(str, shared[:4]))} is alive: it may "
                "hold it and release it when its work ends")
            return
        _mark_lock_abandoned(node, waiter, frame)
        return
    node.pattern = "lock-self-deadlock"
    node.state = "blocked"
    caller = next((f for f in frames[at + 1:] if not is_library(f)), None)
    node.evidence.append(
        f"thread {waiter.name or waiter.os_thread_id} waits to take the lock at {frame_text(frame)}, and no other "
        "thread of this process runs job code: nobody else can hold it — this thread holds it itself "
        "further up its stack (threading.Lock is not reentrant)")
    if finaliser is not None and finaliser is not frame:
        below = frames[frames.index(finaliser) + 1] if frames.index(finaliser) + 1 < len(frames) else None
        node.evidence.append(
            f"the wait is reached from {finaliser.function} ({frame_text(finaliser)}), a finaliser this thread ran "
            f"in the middle of {frame_text(below) if below else 'its work'} (a dropped last reference or a garbage "
            "collection pass): that frame holds the lock the finaliser now waits for")
    elif finaliser is not None:
        node.evidence.append(
            f"the wait is inside {frame.function}, run by this thread when "
            + (f"{frame_text(caller)} dropped the last reference" if caller else "the last reference was dropped")
            + "; that frame (or one below it) is the only place the lock can be held")
    elif caller is not None:
        node.evidence.append(f"called from {frame_text(caller)}: check whether that frame already holds the lock")


# File locks that belong to an open file description, not to a process (/proc/locks types):
# a second open() of the file in the same process makes a second description, whose lock request
# conflicts with the first (flock(2), F_OFD_SETLKW). A POSIX lock (fcntl F_SETLKW, lockf) is the
# process's own: taking it again never blocks on itself.
_PER_OPEN_FILE = ("FLOCK", "OFDLCK")
_CONTEXTLIB = re.compile(r"(^|/)contextlib\.py$")


def self_held_file_locks(b: Builder, key: str) -> list[dict[str, Any]]:
    """The file locks the process waits for whose only holder /proc/locks names is itself, of a
    kind that belongs to an open file description (flock, OFD)."""
    pid = b.verdicts[key].process.pid
    return [lock for lock in _info(b, key).get("file_locks") or []
            if lock.get("waiting") and lock.get("type") in _PER_OPEN_FILE
            and [h.get("pid") for h in lock.get("holders") or []] == [pid]]


def _detect_file_lock_self(b: Builder, key: str) -> bool:
    """A thread asleep taking a flock (or OFD lock) that /proc/locks says its own process holds,
    through another open file description: with no other thread of the process in job code (one
    that could unlock or close the holding descriptor) and no child of it alive (a forked child
    shares an inherited description and could unlock it), nobody can release it: the thread took
    the lock itself further up its stack and now takes it again through a second open() of the
    file (lock-self-deadlock). The deciding line is the inner take: the flock call, or the `with`
    line of its caller when the flock is inside a context-manager helper."""
    locks = self_held_file_locks(b, key)
    if not locks:
        return False
    verdict, node = b.verdicts[key], b.g.nodes[key]
    tid, frame = _file_lock_thread(verdict, _info(b, key))
    waiter = next((t for t, _m in verdict.threads if tid and str(t.os_thread_id) == tid.split()[0]), None) \
        or deciding_thread(verdict)
    lock = locks[0]
    what = f"the {lock.get('type')} {lock.get('access')} lock on {_lock_path(lock)} (inode {lock.get('dev')}:{lock.get('inode')})"
    others = other_threads_in_job_code(verdict, waiter)
    children = [pid for (node_id, pid), info in b.inp.info.items()
                if info.get("child_of") == verdict.process.pid and node_id == verdict.process.node_id
                and (info.get("run_state") or ["?"])[-1] is not None]
    if waiter is None or frame is None or others or children:
        who = (f"thread {others[0].name or others[0].os_thread_id} of it runs job code" if others
               else f"its child pid {children[0]} may share the holding descriptor" if children else "")
        node.evidence.append(f"waits for {what}, which this same process holds through another descriptor (/proc/locks)"
                             + (f"; {who} and may release it" if who else ""))
        return False
    caller = _helper_caller(waiter, frame)
    node.pattern, node.state = "lock-self-deadlock", "blocked"
    choose(node, "file_lock_taken_twice")
    node.frame, node.user_frame = frame, caller or frame
    node.evidence.append(
        f"waits for a file lock its own process holds: /proc/locks names pid {verdict.process.pid}, this very process, as "
        f"the holder of {what}, which thread {tid or waiter.name or waiter.os_thread_id} sleeps taking at "
        f"{frame_text(caller or frame)}, through another open file description")
    node.evidence.append(
        f"a {lock.get('type')} lock belongs to the open file, not the process: a second open() of the file and a new lock "
        "request conflict with the first, and flock reports no deadlock (no EDEADLK). No other thread of this process runs "
        "job code and no child of it is alive: nobody but this thread can unlock or close the holding descriptor - it took "
        "the lock itself further up its stack" + (f" and takes it again at {frame_text(caller)}, through its lock helper "
                                                 f"{frame.function}, which opens the file anew" if caller else ""))
    return True


def own_db_lock_polls(b: Builder, key: str) -> list[dict[str, Any]]:
    """The probe's `lock_polls` of the process (a thread asleep inside one C call while a file it
    has open is POSIX-locked) whose only holder is the process itself: SQLite's write locks, which
    the probe keeps for the process's own pid (probe/kernel_objects.locks_held_by_others)."""
    pid = b.verdicts[key].process.pid
    return [poll for poll in _info(b, key).get("lock_polls") or [] if isinstance(poll, dict)
            and [h.get("pid") for h in poll.get("holders") or [] if isinstance(h, dict)] == [pid]]


def _detect_db_lock_self(b: Builder, key: str) -> bool:
    """A thread asleep inside one C call (SQLite's busy handler sleeps between tries) on a database
    whose write lock (RESERVED, PENDING or EXCLUSIVE: /proc/locks) its own process holds. POSIX
    locks belong to the process, so the kernel never blocks it: SQLite itself refuses the second
    connection of the same process and its busy handler retries until its timeout. With no other
    thread of the process in job code (one that could commit on the first connection), the holder
    is this very thread, further up its stack: lock-self-deadlock, at the inner connection's line."""
    polls = own_db_lock_polls(b, key)
    verdict, node = b.verdicts[key], b.g.nodes[key]
    for poll in polls:
        for tid, wchan in (poll.get("sleeping") or {}).items():
            found = next(((t, m) for t, m in verdict.threads if str(t.os_thread_id) == str(tid)), None)
            if found is None or found[1].pattern not in (None, "unknown") or all(f.native for f in found[0].frames):
                continue  # not a thread inside one C call: its own frames say what it does
            thread, match = found
            frame = match.user_frame or match.frame
            others = other_threads_in_job_code(verdict, thread)
            young = _young_call(b, verdict.process.pid)
            if young:
                node.evidence.append(
                    f"thread {thread.name or thread.os_thread_id} retries in C at {frame_text(frame)} a database lock on "
                    f"{poll.get('path')} that this same process holds (/proc/locks), but {young}: a busy timeout "
                    "(sqlite3's default is 5 s) may still end the call with 'database is locked'")
                return False
            if others:
                node.evidence.append(
                    f"thread {thread.name or thread.os_thread_id} retries in C at {frame_text(frame)} a database lock on "
                    f"{poll.get('path')} that this same process holds (/proc/locks); thread "
                    f"{others[0].name or others[0].os_thread_id} of it runs job code and may commit and release it")
                return False
            node.pattern, node.state = "lock-self-deadlock", "blocked"
            node.frame = node.user_frame = frame
            choose(node, "db_second_connection")
            node.evidence.append(
                f"thread {thread.name or thread.os_thread_id} sleeps in {wchan} inside one C call at {frame_text(frame)} "
                f"while /proc/locks names pid {verdict.process.pid}, this very process, as the only holder of SQLite's "
                f"write lock on {poll.get('path')}: POSIX locks belong to the process, so SQLite itself refuses this "
                "second connection and its busy handler retries until its timeout")
            node.evidence.append(
                "no other thread of this process runs job code: the first connection's open write transaction is this "
                "thread's own, further up its stack, and nothing commits it while this call waits")
            return True
    return False


def _young_call(b: Builder, pid: int | None) -> str:
    """The process's running call, when it began less than `young_wait_s` ago ("" otherwise)."""
    starts = [(t.start_time_ms / 1000.0, t.name) for t in b.inp.tasks
              if t.worker_pid == pid and t.state == "RUNNING" and t.start_time_ms]
    if not starts:
        return ""
    started, name = max(starts)
    age = b.inp.now_s - started
    return f"its call {name} began {max(age, 0.0):.1f}s ago" if age < rules().busy.young_wait_s else ""


def _helper_caller(thread: Thread, frame: Frame) -> Frame | None:
    """The job frame that entered the context-manager helper `frame` is in (`with helper(...)`,
    contextlib's __enter__ between them), or None when the lock is taken in the frame itself."""
    frames = [f for f in thread.frames if not f.native]
    at = next((i for i, f in enumerate(frames) if f is frame), None)
    if at is None:
        return None
    above = frames[at + 1:]
    caller = next((i for i, f in enumerate(above) if not is_library(f)), None)
    if caller is None or not any(_CONTEXTLIB.search(f.file) for f in above[:caller]):
        return None
    return above[caller]


@graph_pass(after=("detect_lock_waits",), decides=("file-lock-wait",))
def detect_file_lock_waits(b: Builder) -> None:
    """Processes that /proc/locks lists as waiting (`->`) for a file lock: the kernel says what
    they wait for, whatever their stack shows (py-spy has no frame for the C call). A process whose
    stack leads nowhere else reads as file-lock-wait (followed by its catalog edge, lock-holder);
    one with another wait it is followed by (ray.get in another thread) gets the lock edge too."""
    for key, verdict in b.verdicts.items():
        waits = [lock for lock in _info(b, key).get("file_locks") or [] if lock.get("waiting")]
        if not waits:
            continue
        node = b.g.nodes[key]
        if node.pattern == "lock-self-deadlock" and len(self_held_file_locks(b, key)) == len(waits):
            continue  # its own lock, taken again through another descriptor (_detect_file_lock_self)
        tid, frame = _file_lock_thread(verdict, _info(b, key))
        if _leads_nowhere(node) or (verdict.main is not None and frame in (verdict.main.user_frame, verdict.main.frame)):
            node.pattern, node.state = "file-lock-wait", "blocked"
            node.frame = node.user_frame = frame
        else:
            _edges_file_locks_of(b, key, frame)
        for lock in waits:
            holders = ", ".join(f"pid {h.get('pid')}" for h in lock.get("holders") or []) or (
                "no holder on this node (a lock on a network filesystem held from another machine, or an OFD lock)")
            node.evidence.append(
                f"thread {tid or '?'} waits for the {lock.get('type')} {lock.get('access')} lock on {_lock_path(lock)} "
                f"(inode {lock.get('dev')}:{lock.get('inode')}) at {frame_text(frame)}; held by {holders} (/proc/locks)")


def _info(b: Builder, key: str) -> dict[str, Any]:
    proc = b.verdicts[key].process
    return b.inp.info.get(proc.ref) or {}


def _leads_nowhere(node: GNode) -> bool:
    """True when a process's own reading is followed nowhere (no pattern, or one with edge none)."""
    pattern = catalog().get(node.pattern or "")
    return pattern is None or pattern.edge == "none"


def _lock_path(lock: dict[str, Any]) -> str:
    return str(lock.get("path") or f"inode {lock.get('dev')}:{lock.get('inode')}")


def _file_lock_thread(verdict: ProcessVerdict, info: dict[str, Any]) -> tuple[str | None, Frame | None]:
    """(tid, frame) of the thread asleep in a kernel file-lock wait (its wchan, matched against the
    catalog's kernel_waits); failing that (wchan hidden), the process's deciding thread."""
    pattern = catalog().get("file-lock-wait")
    waits = pattern.kernel_waits if pattern is not None else ()
    tids = {str(tid): str(name) for tid, name in (info.get("wchan") or {}).items()
            if any(r.search(str(name)) for r in waits)}
    for thread, match in verdict.threads:
        if str(thread.os_thread_id) in tids:
            return f"{thread.os_thread_id} (kernel wait {tids[str(thread.os_thread_id)]})", match.user_frame or match.frame
    main = verdict.main
    return None, (main.user_frame or main.frame) if main is not None else None


def _edges_file_locks_of(b: Builder, key: str, frame: Frame | None = None) -> None:
    """Edges from a process waiting for file locks to the processes holding them (by PID in
    /proc/locks, on the same node): one of the job's, or one made here from its title."""
    node = b.g.nodes[key]
    frame = frame or node.user_frame or node.frame
    for lock in _info(b, key).get("file_locks") or []:
        if not lock.get("waiting"):
            continue
        for holder in lock.get("holders") or []:
            dst = b.by_pid.get(ProcessRef(node.node_id, holder.get("pid"))) or lock_holder_node(b.g, node.node_id, holder)
            b.g.add_edge(key, dst, "file-lock-wait",
                         f"waits at {frame_text(frame)} for the {lock.get('type')} "
                         f"{lock.get('access')} lock on {_lock_path(lock)}, held by pid {holder.get('pid')} (/proc/locks)")
            b.file_lock_holders.setdefault(dst, []).append(_lock_path(lock))


def lock_holder_node(g: WaitGraph, node_id: str | None, holder: dict[str, Any], holds: str = "a file lock") -> str:
    """A node for a holder of a lock (or of what `holds` says) that is not one of the job's dumped processes."""
    key = f"proc:{node_id}:{holder.get('pid')}"
    if key not in g.nodes:
        g.nodes[key] = GNode(key=key, kind="process", name=one_line(holder.get("title") or f"pid {holder.get('pid')}", 80),
                             state="unknown", pid=holder.get("pid"), node_id=node_id,
                             evidence=[f"holds {holds}; not a process of this job that was dumped"])
    return key


@graph_pass(after=("follow_edges",), decides=("file-lock-held",))
def mark_file_lock_holders(b: Builder) -> None:
    """The holder of a file lock others wait for: when its own reading says nothing, holding the
    lock is what it is found for (a chain end: file-lock-held)."""
    for key, paths in b.file_lock_holders.items():
        node = b.g.nodes[key]
        for path in paths:
            note = f"holds the lock on {path} (/proc/locks)"
            if note not in node.evidence:
                node.evidence.append(note)
        if node.pattern in (None, "idle-worker"):
            node.pattern = "file-lock-held"


# Native waits whose releaser is whoever holds or posts the object waited on (a mutex, a semaphore;
# a lock a multiprocessing manager serves, taken in C by the thread serving a client's acquire).
_NATIVE_WAITS = ("native-condition-wait", "native-lock-wait", "manager-served-wait")
_MANAGERS = re.compile(r"multiprocessing/managers\.py$")
_PROCESS = re.compile(r"multiprocessing/process\.py$")


@graph_pass(after=("detect_lock_waits",), decides=("native-wait-holder-died",))
def edges_native_wait_holders(b: Builder) -> None:
    """A wait in native code (a ctypes or C call: sem_wait, pthread_mutex_lock) that no other thread
    of its process can release - none runs job code - waits on another process: a named or shared
    semaphore, a process-shared mutex. The job's processes that died before the wait began are its
    likely holders (a POSIX semaphore is not posted when its holder dies): a guessed edge to each.
    Never the waiter itself: it waits, it does not hold."""
    _link_local_managers(b)
    for key, verdict in b.verdicts.items():
        node = b.g.nodes[key]
        waiter = b.deciding.get(key) or deciding_thread(verdict)
        if node.pattern not in _NATIVE_WAITS or waiter is None \
                or any(not _manager_machinery(t) for t in other_threads_in_job_code(verdict, waiter)):
            continue
        served = node.pattern == "manager-served-wait"
        if served and (not _serves_a_lock(waiter) or not _every_client_waits(b, key)):
            continue  # a served queue or event (its clients feed it), or a live client that may hold the lock
        if served:
            node.evidence.append(
                f"thread {waiter.name or waiter.os_thread_id} of this multiprocessing manager serves a client's call to a "
                f"lock it serves ({frame_text(node.user_frame or node.frame)}: the served Lock.acquire, in C), and no "
                "thread of this process runs job code: the lock is held on behalf of a client (a served lock belongs to "
                "the server, not to the client connection), and only that client's release call frees it")
        else:
            node.evidence.append(
                f"thread {waiter.name or waiter.os_thread_id} waits in native code at {frame_text(node.user_frame or node.frame)}, "
                "and no other thread of this process runs job code: nothing in this process can release or post what it "
                "waits on - another process holds it (a named or shared-memory semaphore, a process-shared mutex), or nobody")
        started = min((t.start_time_ms for t in b.running.get(key, []) if t.start_time_ms), default=None)
        if started is None and served:
            started = min((t.start_time_ms for t in b.tasks if t.state == "RUNNING" and t.start_time_ms), default=None)
        holders = _dead_before(b, started) + (_died_tasks_before(b, started) if served else [])
        if served and not holders and not _unlinked_peers(b, key) and _no_idle_handler(verdict):
            _mark_client_gone(b, key, verdict)
        for dead_key, dead in holders:
            calls = [t for t in b.index.of_actor(dead.actor_id or "") if t.state == "FAILED"]
            last = max(calls, key=lambda t: t.end_time_ms or 0.0, default=None)
            b.g.add_edge(key, dead_key, "native-wait-holder-died",
                         f"may wait for what {dead.label()} held: it died before this wait began"
                         + (f" (its call {last.name} FAILED)" if last is not None else "")
                         + ("; a lock a manager serves is not released when the client holding it dies" if served
                            else "; a semaphore or lock taken in native code is not released when its holder dies"),
                         guessed=True)
            if dead.pattern is None:
                dead.pattern = "native-wait-holder-died"
                if last is not None:
                    dead.evidence.append(f"its last call {last.name} FAILED ({last.error_type or 'error'})")
    mark_ended_semlock_holders(b)


def _manager_machinery(thread: Thread) -> bool:
    """A thread of a multiprocessing manager's own server that runs no job code: its accept loop,
    its serve_forever, a handler serving a call (each waits for clients, none releases a lock)."""
    frames = [f for f in thread.frames if not f.native]
    # A forked server's main thread still shows, below multiprocessing's bootstrap, the frames of
    # the parent that forked it (Manager() in an actor's __init__): they never run again.
    cut = next((i for i, f in enumerate(frames) if f.function.endswith("_bootstrap") and _PROCESS.search(f.file)), None)
    frames = frames if cut is None else frames[:cut + 1]
    return all(is_library(f) for f in frames) and any(_MANAGERS.search(f.file) for f in frames)


def _every_client_waits(b: Builder, key: str) -> bool:
    """Every process of the job at the other end of the manager's TCP connections that no Ray call
    explains waits in a proxy call itself (none of them is free, holding the served lock); a peer
    that is no process of the job may hold it. With no TCP peer seen (a unix-socket manager), the
    manager's own handler threads tell: one per client connection, none idle at its `recv()`
    means every connected client is inside a served call itself."""
    peers = _unlinked_peers(b, key)
    if not peers:
        return _no_idle_handler(b.verdicts[key])
    node = b.g.nodes[key]
    keys = [b.by_pid.get(ProcessRef(node.node_id, p["pid"])) for p in peers]
    return bool(keys) and all(k is not None and b.g.nodes[k].pattern == "manager-call-wait" for k in keys)


def _serves_a_lock(thread: Thread) -> bool:
    """The manager's handler thread serves a call on a lock (its `obj` fact is a Lock or RLock);
    unknown (no facts) counts as one: the served call blocks in C, as an acquire does."""
    frame = next((f for f in thread.frames if not f.native and f.function.endswith("serve_client")), None)
    obj = (frame.facts or {}).get("obj") if frame is not None else None
    return not isinstance(obj, str) or bool(re.match(r"^_?(thread\.)?(lock|RLock|Lock|_RLock)@", obj))


def _died_tasks_before(b: Builder, started_ms: float | None) -> list[tuple[str, GNode]]:
    """The job's tasks whose worker died (FAILED with a death error type) before `started_ms`: a
    node each, graphed here (all of them when unknown)."""
    deaths = set(rules().crash_loop.death_error_types)
    out = []
    for task in b.tasks:
        if task.state != "FAILED" or task.error_type not in deaths or task.actor_id or not task.task_id:
            continue
        if started_ms is not None and (task.end_time_ms is None or task.end_time_ms > started_ms):
            continue
        key = f"task:{task.task_id}"
        if key not in b.g.nodes:
            b.g.nodes[key] = GNode(key=key, kind="task", name=task.name, state="dead", task_id=task.task_id,
                                   node_id=task.node_id, task_name=task.name, pid=task.worker_pid)
            b.g.nodes[key].evidence.append(f"FAILED: its worker died ({task.error_type})")
        out.append((key, b.g.nodes[key]))
    return out


def _dead_before(b: Builder, started_ms: float | None) -> list[tuple[str, GNode]]:
    """The job's dead actors whose last call ended before `started_ms` (all of them when unknown)."""
    out = []
    for key, node in b.g.nodes.items():
        if node.kind != "actor" or node.state != "dead" or node.actor_id is None:
            continue
        ends = [t.end_time_ms for t in b.index.of_actor(node.actor_id) if t.end_time_ms]
        if started_ms is None or not ends or max(ends) <= started_ms:
            out.append((key, node))
    return out


def _handlers(verdict: ProcessVerdict) -> list[Thread]:
    """The manager's handler threads: one per client connection (Server.serve_client on its stack)."""
    return [t for t, _m in verdict.threads
            if any(not f.native and f.function.endswith("serve_client") and _MANAGERS.search(f.file) for f in t.frames)]


def _in_served_call(thread: Thread) -> bool:
    """A handler thread inside the method it serves (serve_client innermost, at its call of it)."""
    frames = [f for f in thread.frames if not f.native]
    return bool(frames) and frames[0].function.endswith("serve_client") and "function(*args" in (frames[0].code or "")


def _no_idle_handler(verdict: ProcessVerdict) -> bool:
    """Every handler thread of the manager is inside a served call: no connected client is idle,
    so none holds a served lock it could still release (a client's connection stays open, its
    handler at `recv()`, while the client lives and keeps its proxy)."""
    handlers = _handlers(verdict)
    return bool(handlers) and all(_in_served_call(t) for t in handlers)


def _link_local_managers(b: Builder) -> None:
    """A proxy call (manager-call-wait) with no TCP peer to follow (a default Manager() talks over
    a unix socket) waits for the one process of the job on its node that runs a manager's server
    with a handler thread inside a served call: an edge to it, whose reading becomes that handler's
    (its main thread's serve_forever is the server's own idle loop)."""
    served: dict[str | None, list[tuple[str, Thread]]] = {}
    for key, verdict in b.verdicts.items():
        busy = [t for t in _handlers(verdict) if _in_served_call(t)]
        if busy:
            served.setdefault(b.g.nodes[key].node_id, []).append((key, busy[0]))
    if not served:
        return
    for key in list(b.verdicts):
        node = b.g.nodes[key]
        managers = [(k, t) for k, t in served.get(node.node_id, []) if k != key]
        if node.pattern != "manager-call-wait" or b.g.out(key) or _unlinked_peers(b, key) or len(managers) != 1:
            continue
        dst, handler = managers[0]
        manager = b.g.nodes[dst]
        if manager.pattern != "manager-served-wait":
            match = next((m for t, m in b.verdicts[dst].threads if t is handler), None)
            manager.pattern = "manager-served-wait"
            manager.frame = match.frame if match is not None else handler.frames[0]
            manager.user_frame = match.user_frame if match is not None else None
            manager.state = "blocked"
            b.deciding[dst] = handler
        b.g.add_edge(key, dst, "manager-call-wait",
                     f"waits in a proxy call for a multiprocessing manager's answer; {manager.label()} is the one process "
                     "of the job on this node that runs a manager's server with a handler inside a served call (no TCP "
                     "peer: the manager talks over a unix socket)")


def _mark_client_gone(b: Builder, key: str, verdict: ProcessVerdict) -> None:
    """The served lock's holder is no connected client and no dead process of the job known: a
    client that took it and went away (its connection closed). A node for it, the culprit."""
    node = b.g.nodes[key]
    handlers = _handlers(verdict)
    gone = f"gone-client:{key}"
    b.g.nodes[gone] = GNode(
        key=gone, kind="process", name=f"a client of the manager {node.label()} that took its served lock and is gone", state="dead",
        node_id=node.node_id, pattern="native-wait-holder-died",
        evidence=[f"every one of the manager's {len(handlers)} client connection(s) is inside a served call (its handler "
                  "thread in serve_client, none idle at recv()): no connected client holds the served lock, so the one "
                  "that took it has closed its connection - a process that exited (or dropped its proxy) holding it; a "
                  "lock a manager serves is not released when its client goes"])
    b.g.add_edge(key, gone, "native-wait-holder-died",
                 "serves an acquire of a lock no connected client holds: its holder was a client that has gone")


def _unlinked_peers(b: Builder, key: str) -> list[dict[str, Any]]:
    """The node's TCP peers on its node that no Ray call explains (a manager's clients, a server it reads)."""
    node = b.g.nodes[key]
    linked = ray_linked(b, [key])
    return [p for p in socket_peers_of(b, key)
            if p["pid"] != node.pid and ProcessRef(node.node_id, p["pid"]) not in linked]
