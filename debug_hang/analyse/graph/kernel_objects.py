"""Waits on kernel objects whose other party is another process of the node, as the node probe
read them (probe/kernel_objects.py): a blocking open() of a FIFO, to whoever could still open its
other end (fifo-open-wait; fifo-never-opened when nobody can), and a file lock retried in C
(SQLite's busy handler) to the process /proc/locks names as its holder (file-lock-poll)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.locks import lock_holder_node
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.threads import frame_text, reachable_from, timed_wait, timed_wait_text
from debug_hang.analyse.patterns import ProcessVerdict, ThreadMatch, catalog
from debug_hang.model import ProcessRef, Thread
from debug_hang.rows import TaskRow

# A reading that says nothing of what the thread waits for: the kernel's reading replaces it.
_SILENT = (None, "unknown")
# SQLite's unix locking protocol: the lock bytes at 0x40000000 (sqlite3 os_unix.c).
_PENDING, _RESERVED, _SHARED_FIRST, _SHARED_LAST = 0x40000000, 0x40000001, 0x40000002, 0x40000002 + 509
_SQLITE_LOCKS = {
    ("WRITE", _RESERVED, _RESERVED): "SQLite's RESERVED lock: a write transaction is open (BEGIN IMMEDIATE or a first write, not committed)",
    ("WRITE", _PENDING, _PENDING): "SQLite's PENDING lock: a commit waits for the readers to leave",
    ("WRITE", _SHARED_FIRST, _SHARED_LAST): "SQLite's EXCLUSIVE lock: a commit is writing",
    ("READ", _SHARED_FIRST, _SHARED_LAST): "SQLite's SHARED lock: a read transaction is open",
}


@graph_pass(after=("detect_file_lock_waits",), decides=("fifo-open-wait", "file-lock-poll"))
def detect_kernel_object_waits(b: Builder) -> None:
    """Processes with a thread the kernel shows waiting on another process of the node: blocked
    opening a FIFO (fifo-open-wait, followed after the graph is built: follow_fifo_opens), or
    asleep inside one C call while another process holds a file lock on a file it has open
    (file-lock-poll: an edge to each holder, unless the wait may end by its own timeout)."""
    for key, verdict in b.verdicts.items():
        info = b.inp.info.get(verdict.process.ref) or {}
        if not _read_fifo_open(b, key, verdict, info) and not _read_pipe_read(b, key, verdict, info):
            _read_lock_poll(b, key, verdict, info)


def _thread(verdict: ProcessVerdict, tid: object) -> tuple[Thread, ThreadMatch] | None:
    return next(((t, m) for t, m in verdict.threads if str(t.os_thread_id) == str(tid)), None)


def _takes_over(b: Builder, key: str, verdict: ProcessVerdict, match: ThreadMatch) -> bool:
    """The kernel's reading of this thread stands for the process: it is the thread that decided
    the process, or the process's own reading says nothing."""
    return match is verdict.main or b.g.nodes[key].pattern in _SILENT


def _read_fifo_open(b: Builder, key: str, verdict: ProcessVerdict, info: dict[str, Any]) -> bool:
    node = b.g.nodes[key]
    for opened in (o for o in info.get("fifo_opens") or [] if isinstance(o, dict)):
        found = _thread(verdict, opened.get("tid"))
        if found is None:
            continue
        thread, match = found
        frame = match.user_frame or match.frame
        path = opened.get("path") or "a FIFO whose path could not be read"
        node.evidence.append(
            f"thread {thread.name or thread.os_thread_id} is blocked in open() of the FIFO {path} for "
            f"{'writing' if opened.get('access') == 'write' else 'reading'} at {frame_text(frame)}: the kernel keeps it in "
            f"{opened.get('wchan')} until a process opens the other end (/proc wchan, the open's path argument)")
        if _takes_over(b, key, verdict, match):
            node.pattern, node.state = "fifo-open-wait", "blocked"
            node.frame = node.user_frame = frame
            return True
    return False


def _read_pipe_read(b: Builder, key: str, verdict: ProcessVerdict, info: dict[str, Any]) -> bool:
    """A thread asleep in one C call reading an empty pipe that is no standard descriptor (an
    os.pipe() used as a queue): the consumer of a queue whose producers are whoever holds the
    write end (queue-get-wait, followed to them by follow_queue, queues.py)."""
    node = b.g.nodes[key]
    for read in (r for r in info.get("pipe_reads") or [] if isinstance(r, dict)):
        found = _thread(verdict, read.get("tid"))
        if found is None or not _in_one_c_call(*found) or not _takes_over(b, key, verdict, found[1]):
            continue
        thread, match = found
        frame = match.user_frame or match.frame
        node.pattern, node.state = "queue-get-wait", "blocked"
        node.frame = node.user_frame = frame
        b.pipe_reads[key] = (thread, read)
        node.evidence.append(
            f"thread {thread.name or thread.os_thread_id} is asleep in the kernel reading the empty pipe "
            f"pipe:[{read.get('inode')}] (fd {read.get('fd')}) at {frame_text(frame)} (/proc wchan, the read's "
            "descriptor): it waits for a process holding the write end to write, or for every write end to close")
        return True
    return False


def _read_lock_poll(b: Builder, key: str, verdict: ProcessVerdict, info: dict[str, Any]) -> None:
    node = b.g.nodes[key]
    if node.pattern == "lock-self-deadlock":
        return  # decided by its own lock (locks._detect_db_lock_self)
    own = verdict.process.pid
    for poll in (p for p in info.get("lock_polls") or [] if isinstance(p, dict)):
        if [h.get("pid") for h in poll.get("holders") or [] if isinstance(h, dict)] == [own]:
            continue  # held by this process alone, and not decided a self-deadlock: a thread of it may commit
        for tid, wchan in (poll.get("sleeping") or {}).items():
            found = _thread(verdict, tid)
            if found is None or not _in_one_c_call(*found) or not _takes_over(b, key, verdict, found[1]):
                continue
            thread, match = found
            frame = match.user_frame or match.frame
            node.pattern, node.state = "file-lock-poll", "blocked"
            node.frame = node.user_frame = frame
            holders = [h for h in poll.get("holders") or [] if isinstance(h, dict) and isinstance(h.get("pid"), int)]
            node.evidence.append(
                f"thread {thread.name or thread.os_thread_id} sleeps in {wchan} inside one C call at {frame_text(frame)} "
                f"(no Python frame below it) while {_holders_text(holders)} on {poll.get('path')} (/proc/locks, no "
                "waiter listed): a lock retried in C — SQLite's busy handler sleeps between tries — waits for its holder")
            ends = _ends_by_itself(b, key, thread)
            if ends:
                node.evidence.append(ends)
                return
            for holder in holders:
                dst = b.by_pid.get(ProcessRef(node.node_id, holder["pid"])) or lock_holder_node(b.g, node.node_id, holder)
                if dst == key:
                    continue
                b.g.add_edge(key, dst, "file-lock-wait",
                             f"retries at {frame_text(frame)} the lock on {poll.get('path')} that pid {holder['pid']} holds "
                             f"({_locks_text(holder)}; /proc/locks)")
                b.file_lock_holders.setdefault(dst, []).append(str(poll.get("path")))
                meanings = [m for m in (_sqlite_lock(lock) for lock in holder.get("locks") or []) if m]
                # A writer holds SHARED too: its strongest lock says what it is in.
                for meaning in [m for m in meanings if "SHARED" not in m] or meanings[:1]:
                    line = f"holds {meaning} on {poll.get('path')}"
                    if line not in b.g.nodes[dst].evidence:
                        b.g.nodes[dst].evidence.append(line)
            return


def _in_one_c_call(thread: Thread, match: ThreadMatch) -> bool:
    """The thread's wait is no reading of its Python frames (none matched: a sleep written in
    Python, `time.sleep(...)`, is read by its own pattern): its innermost Python line called into C."""
    return match.pattern in _SILENT and any(not f.native for f in thread.frames)


def _ends_by_itself(b: Builder, key: str, thread: Thread) -> str:
    """Why the retry may end by itself ("" if nothing says so): a timeout in its source, or a wait
    shorter than the default busy timeout (Python's sqlite3 gives up after 5 s unless told)."""
    timed = timed_wait(thread)
    if timed is not None:
        return timed_wait_text(frame_text(b.g.nodes[key].frame), timed)
    pattern = catalog().get("file-lock-poll")
    limit = pattern.thresholds.get("default_timeout_s", 5.0) if pattern is not None else 5.0
    started = min((t.start_time_ms for t in b.running.get(key, []) if t.start_time_ms), default=None)
    if started is None or not b.inp.now_s:
        b.g.nodes[key].evidence.append("how long its call has retried is not known (no start time): its busy timeout "
                                       "may end the wait (`database is locked`)")
        return ""
    waited = b.inp.now_s - started / 1000.0
    if waited >= limit:
        b.g.nodes[key].evidence.append(
            f"its call has retried for {waited:.1f}s, longer than the busy timeout a connection has unless told "
            f"({limit:.0f}s): it was given a longer one; it fails (`database is locked`) only when that runs out")
        return ""
    return (f"its call has run {waited:.1f}s, less than the busy timeout a connection has unless told ({limit:.0f}s): "
            "the retry may give up by itself (`database is locked`); a longer window tells")


def _holders_text(holders: list[dict[str, Any]]) -> str:
    if not holders:
        return "no live process holds a lock"
    return "; ".join(f"pid {h['pid']} holds {_locks_text(h)}" for h in holders[:3])


def _locks_text(holder: dict[str, Any]) -> str:
    parts = []
    for lock in holder.get("locks") or []:
        meaning = _sqlite_lock(lock)
        parts.append(f"{lock.get('type')} {lock.get('access')} {lock.get('range')}" + (f" = {meaning.split(':')[0]}" if meaning else ""))
    return ", ".join(parts) or "a lock"


def _sqlite_lock(lock: dict[str, Any]) -> str | None:
    """What a POSIX lock means in SQLite's locking protocol, when its bytes are SQLite's."""
    try:
        start, end = (int(x) for x in str(lock.get("range") or "").split())
    except ValueError:
        return None
    return _SQLITE_LOCKS.get((str(lock.get("access")), start, end))


@graph_pass(after=("mark_file_lock_holders",), decides=("db-transaction-held",))
def mark_transaction_holders(b: Builder) -> None:
    """A holder of SQLite's locks that a busy handler retries, idle (its last call returned): the
    transaction it left open is what nothing ends (db-transaction-held, over file-lock-held)."""
    for key, node in b.g.nodes.items():
        if node.pattern != "file-lock-poll":
            continue
        polls = [p for p in (b.inp.info.get(node.ref) or {}).get("lock_polls") or [] if isinstance(p, dict)]
        held = {h["pid"]: h for p in polls for h in p.get("holders") or [] if isinstance(h, dict) and "pid" in h}
        for edge in b.g.out(key):
            dst = b.g.nodes[edge.dst]
            holder = held.get(dst.pid)
            if edge.why == "file-lock-wait" and dst.pattern == "file-lock-held" and dst.state == "idle" and holder \
                    and any(_sqlite_lock(lock) for lock in holder.get("locks") or []):
                dst.pattern = "db-transaction-held"


@graph_pass(after=("follow_edges",), decides=("fifo-never-opened",))
def follow_fifo_opens(b: Builder) -> None:
    """A blocked FIFO open waits for whoever could open the other end: a process of the node that
    holds it open (an edge), else the job's live processes on the node that do not wait on the
    opener (each may still open it: a guessed edge). With none, nobody will: the calls of the node
    that ended while it waited without opening it are the culprits (fifo-never-opened), or, with
    none, the opener itself (nothing of the job opens that path)."""
    for key, node in list(b.g.nodes.items()):
        if node.pattern != "fifo-open-wait" or key not in b.verdicts:
            continue
        info = b.inp.info.get(node.ref) or {}
        opened = next((o for o in info.get("fifo_opens") or [] if isinstance(o, dict)), {})
        path = str(opened.get("path") or "the FIFO")
        other = "read" if opened.get("access") == "write" else "write"
        holders = [h for h in opened.get("holders") or [] if isinstance(h, dict) and h.get("pid") != node.pid
                   and isinstance(h.get("pid"), int) and (other in (h.get("ends") or []) or "both" in (h.get("ends") or []))]
        for holder in holders:
            dst = b.by_pid.get(ProcessRef(node.node_id, holder["pid"])) or lock_holder_node(
                b.g, node.node_id, holder, holds=f"{path} open for {other}ing")
            b.g.add_edge(key, dst, "fifo-open-wait", f"opens {path}, which pid {holder['pid']} holds open for {other}ing")
        if holders:
            continue
        if "scanned" in opened:
            node.evidence.append(f"no process of its node has {path} open ({opened.get('scanned')} processes' descriptors read"
                                 + (f", {opened.get('unreadable')} unreadable" if opened.get("unreadable") else "") + ")")
        could = _could_open(b, key)
        if not could and _parent_waits_on_opener(b, key, path, other):
            continue
        for dst in could:
            b.g.add_edge(key, dst, "fifo-open-wait",
                         f"waits in open() of {path} for a {other}r: {b.g.nodes[dst].label()} is live, does not wait on it "
                         "and may still open it", guessed=True)
        if not could:
            _never_opened(b, key, path, other)


def _could_open(b: Builder, key: str) -> list[str]:
    """The job's processes that could still open the FIFO: live on the opener's node (a FIFO is
    one machine's), busy, waiting on something other than the opener, or not read (a stack that
    could not be dumped may be the writer's); and calls not yet placed."""
    node = b.g.nodes[key]
    out: list[str] = []
    for other, n in b.g.nodes.items():
        if other == key or n.kind not in ("actor", "task", "driver", "process", "rank"):
            continue
        states = ("busy", "blocked", "unknown") if n.kind != "process" else ("busy", "blocked")
        live_here = n.node_id == node.node_id and n.pid is not None and n.state in states
        if (live_here or n.state == "pending") and key not in reachable_from(b.g, other):
            out.append(other)
    return out


def _parent_waits_on_opener(b: Builder, key: str, path: str, other: str) -> bool:
    """A child blocked opening a FIFO whose parent, live on its node, waits for that child's exit:
    no other process of the job could open the other end (every one waits, down its chain, on the
    child), and the parent — the one process the child's end was made for — opens it only once its
    wait returns, which needs the child's open to return first: a cycle parent → child's exit →
    the FIFO's other end → parent. The parent's wait before its open is the culprit
    (fifo-never-opened), the child its victim. True when so decided."""
    node = b.g.nodes[key]
    parents = [e.src for e in b.g.edges if e.dst == key and e.why == "child-process-wait"
               and b.g.nodes[e.src].node_id == node.node_id and b.g.nodes[e.src].state in ("blocked", "busy", "unknown")]
    if not parents:
        return False
    for parent in parents:
        culprit = b.g.nodes[parent]
        where = culprit.user_frame or culprit.frame
        culprit.pattern, culprit.state = "fifo-never-opened", "blocked"
        culprit.evidence.append(
            f"waits for the exit of its child pid {node.pid}{' at ' + frame_text(where) if where else ''}, and the child "
            f"waits in open() of {path} for a {other}r: no other process of the job can open it (every one waits on the "
            f"child), so only this parent, after its wait, could — it waits for the child before opening the other end "
            "(open or read the FIFO first, or concurrently, then wait)")
        b.g.add_edge(key, parent, "fifo-never-opened",
                     f"waits in open() of {path} for a {other}r; the only process that could open it, its parent "
                     f"{culprit.label()}, waits for this child's exit first")
    node.evidence.append(
        f"no live process of the job but its parent can still open {path} for {other}ing, and the parent waits for "
        "this child to exit: the child is the parent's victim")
    return True


def _never_opened(b: Builder, key: str, path: str, other: str) -> None:
    """Nobody live will open the FIFO: name the calls of the node that ended while it waited."""
    node = b.g.nodes[key]
    ended = _ended_during(b, key)
    node.evidence.append(
        f"no live process of the job can still open {path} for {other}ing: every other one is idle or waits on this one, "
        "and no call is pending")
    if not ended:
        node.pattern = "fifo-never-opened"
        node.evidence.append(f"no call of the job ran on its node while it waited: nothing of the job opens {path} "
                             "(check the path it opens against the one its writer uses)")
        return
    for task in ended:
        dst = f"task:{task.task_id}"
        if dst not in b.g.nodes:
            b.g.nodes[dst] = GNode(key=dst, kind="task", name=task.name, state="idle", task_id=task.task_id,
                                   node_id=task.node_id, task_name=task.name, pid=task.worker_pid, actor_id=task.actor_id)
        culprit = b.g.nodes[dst]
        culprit.pattern = "fifo-never-opened"
        culprit.evidence.append(
            f"{task.state} at {_clock(task.end_time_ms)}, on the opener's node, while {node.label()} waited in open() of "
            f"{path}: it never opened it (the open would have returned) — if it was to {other} it, it used another path")
        b.g.add_edge(key, dst, "fifo-open-wait",
                     f"waits in open() of {path} for a {other}r; {task.name} ran on its node meanwhile and ended "
                     "without opening it", guessed=True)


def _ended_during(b: Builder, key: str) -> list[TaskRow]:
    """The job's calls on the opener's node that ended (FINISHED or FAILED) after its own call began."""
    node = b.g.nodes[key]
    own = b.running.get(key, [])
    started = min((t.start_time_ms for t in own if t.start_time_ms), default=None)
    if started is None:
        return []
    mine = {t.task_id for t in own}
    return [t for t in b.tasks if t.state in ("FINISHED", "FAILED") and t.task_id not in mine and t.task_id
            and t.node_id == node.node_id and t.end_time_ms is not None and t.end_time_ms > started]


def _clock(ms: float | None) -> str:
    return datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc).strftime("%H:%M:%S") if ms else "?"
