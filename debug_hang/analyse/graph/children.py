"""Child processes: a parent waiting on its children (or polling them), a pool that lost a task
with a killed worker, and a child blocked on a pipe only its waiting parent could act on (drain
its full stdout, or close its stdin)."""

from __future__ import annotations

import re
from typing import Any

from debug_hang.analyse.crashloop import children_crash_loop
from debug_hang.analyse.fixes import choose
from debug_hang.analyse.graph.builder import Builder, follows
from debug_hang.analyse.graph.forks import fork_lost_thread
from debug_hang.analyse.graph.locks import lock_holder_node
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.raycalls import follow_submitted
from debug_hang.analyse.graph.semlocks import at_semlock_acquire
from debug_hang.analyse.graph.sockets import child_traffic
from debug_hang.analyse.graph.threads import (
    deciding_thread,
    frame_text,
    job_frame,
    other_threads_in_job_code,
    waits_with_timeout,
)
from debug_hang.analyse.pattern_ids import PatternId
from debug_hang.analyse.patterns import ProcessVerdict, catalog, is_library
from debug_hang.model import Frame, Process, ProcessRef
from debug_hang.untrusted import one_line


@follows("child-process", decides=("child-process-hang", "pipe-write-wait", "pipe-read-wait", "pool-task-lost"))
def follow_children(b: Builder, key: str) -> None:
    """A process waiting on its child processes; an unrecognised wait of an actor with a running
    call is followed to that call's unfinished tasks too (an async actor awaiting its own calls)."""
    node = b.g.nodes[key]
    proc = b.verdicts[key].process
    if _pool_task_lost(b, key):
        return
    _edges_children(b, key, proc)
    if node.pattern is None and proc.actor_id and b.running.get(key):
        # An async actor awaiting the calls it made shows only an idle event loop: its running
        # task's unfinished calls are what it waits for.
        follow_submitted(b, key)
        if b.g.out(key):
            node.state = "blocked"
            node.evidence.append("awaits the calls it made (an async actor: its own stack shows only an idle event loop)")


_HELPER_CHILD = re.compile(r"multiprocessing\.(resource_tracker|forkserver)|from multiprocessing\.(resource_tracker|forkserver) import")


def _gone_children(b: Builder, proc: Process) -> list[int]:
    """Children of `proc` (on its node, not multiprocessing's helpers) listed during the window and
    gone by its end (no run state at the last reading)."""
    gone: list[int] = []
    for (node_id, pid), info in b.inp.info.items():
        if info.get("child_of") != proc.pid or node_id != proc.node_id or pid is None:
            continue
        if _HELPER_CHILD.search(str(info.get("title") or "")):
            continue
        run_state = info.get("run_state")
        if isinstance(run_state, list) and len(run_state) > 1 and run_state[-1] is None:
            gone.append(pid)
    return sorted(gone)


def children_crash_loop_of(b: Builder, key: str, proc: Process) -> bool:
    """A process waiting on children that die and are replaced, each with the same traceback.

    Its children exit within the window (listed, then gone: new pids at each reading) and its log
    - the stderr the children inherit - ends one traceback with the same exception line again and
    again: each new child fails the same way (a pool initializer that raises, a worker that crashes
    on start). A pool replaces them forever and never fails the wait, so the wait is a crash loop
    whose fix is in this process (its children's start-up code, or a pool that surfaces the error),
    not in a child that happens to be alive at one reading. Children that exit with no repeated
    traceback (workers recycled after N tasks) are not this. True when so marked."""
    info = b.inp.info.get(ProcessRef(proc.node_id, proc.pid)) or {}
    logs = [log for log in ((info.get("progress") or {}).get("logs") or []) if isinstance(log, dict)]
    node = b.g.nodes[key]
    loop = children_crash_loop(proc.actor_id or proc.task_id or key, node.name, _gone_children(b, proc), logs)
    if loop is None:
        return False
    node.pattern, node.state = "crash-loop", "blocked"
    pids = ", ".join(str(p) for p in _gone_children(b, proc)[:6])
    node.evidence.append(f"{loop.text()} (gone: pid {pids}); it waits on its children, and the children it waits "
                         "on are replaced by new ones that die the same way: a crash loop of its child processes")
    # Kept for the verdict and the death quote whoever the parent is: an actor or a task by its id,
    # the driver (a script that runs the pool itself) by its node key.
    b.g.crash_loops[loop.id] = loop
    return True


def _edges_children(b: Builder, key: str, proc: Process) -> None:
    """Edges to the child processes of `proc` (read on its node), each marked as the chain's end."""
    g = b.g
    gone: list[int | None] = []
    zombies: list[int | None] = []
    for (node_id, pid), info in b.inp.info.items():
        if info.get("child_of") != proc.pid or node_id != proc.node_id:
            continue
        if _HELPER_CHILD.search(str(info.get("title") or "")):
            continue  # multiprocessing's own helpers (resource tracker, fork server) wait by design
        run_state = info.get("run_state")
        if isinstance(run_state, list) and len(run_state) > 1 and run_state[-1] is None:
            gone.append(pid)  # it exited during the window: not a child that never exits
            continue
        if isinstance(run_state, list) and run_state and all(s == "Z" for s in run_state):
            zombies.append(pid)  # it has exited (not reaped yet): whatever the parent waits on, not its exit
            continue
        child_key = b.by_pid.get(ProcessRef(proc.node_id, pid))
        if child_key is None:
            child_key = f"proc:{proc.node_id}:{pid}"
            g.nodes[child_key] = GNode(key=child_key, kind="process", name=one_line(info.get("title") or f"pid {pid}"),
                                       state="unknown", pid=pid, node_id=proc.node_id,
                                       evidence=["child process (no Python stack: not a Python process "
                                                 "or not dumpable)"])
        child = g.nodes[child_key]
        child.kind = "process"
        child.class_name = child.class_name or g.nodes[key].class_name  # spawned by this actor
        child.name = f"child of {g.nodes[key].name}: {one_line(info.get('title') or pid)}"
        where = child.user_frame or child.frame
        if not any(e.startswith("stack: ") for e in child.evidence):
            child.evidence.append(f"its own stack: {child.pattern or child.state}"
                                  + (f" at {frame_text(where)}" if where else ""))
        verdict = b.verdicts.get(child_key)
        if verdict is not None and child.pattern == "lock-wait":
            holders = other_threads_in_job_code(verdict, deciding_thread(verdict))
            if not holders:
                child.evidence.append(
                    "no other thread of the child runs job code, so no thread of the child holds that lock: "
                    "it was held in the parent when the child was forked (fork copies a lock's state, "
                    "not the thread that would release it)")
        child.evidence.extend(line for line in fork_lost_thread(b, key, child_key) if line not in child.evidence)
        # A child whose own wait is read already names why it does not exit: an exit's join, an
        # open() of a FIFO the kernel holds until a partner opens the other end (follow_fifo_opens
        # decides it after the edges: the partner may be this very parent), or a file lock the
        # kernel lists it waiting for (followed to the holder, who may be this very parent).
        if child.pattern not in ("exit-join-blocked", "fifo-open-wait", "file-lock-wait"):
            child.pattern = "child-process-hang"  # the chain ends in a child that does not exit
            child_traffic(child, info)
            if verdict is None:
                _note_timed_sleep(child, info)
        elif child.pattern == "file-lock-wait" and _waits_for_lock_of(info, proc.pid):
            choose(g.nodes[key], "file_lock_held_for_child")
        pipes = info.get("std_pipes") or {}
        read, write = _parent_reads(pipes), _parent_writes(pipes)
        g.add_edge(key, child_key, "child-process-wait",
                   f"reads child pid {pid}'s {read}" if read else
                   f"writes child pid {pid}'s {write}" if write else f"waits for child pid {pid}")
        _edge_pipe_back(b, key, child_key, info)
        _edge_sent_after_join(b, key, child_key)
    if gone:
        g.nodes[key].evidence.append(
            f"{len(gone)} child process(es) of it (pid {', '.join(str(p) for p in sorted(gone, key=str)[:6])}) were alive at the "
            "first reading and gone at the last: children that exit, not children that never exit; a pool whose "
            "workers die and are replaced (an initializer or a task that kills them) shows so, its traceback in this "
            "process's log")
    if zombies:
        g.nodes[key].evidence.append(
            f"its child process(es) pid {', '.join(str(p) for p in sorted(zombies, key=str)[:6])} have exited (zombie, "
            "state Z in every reading: not reaped until the parent's wait returns): it does not wait for them to exit. "
            "A communicate() (subprocess.run with capture_output) reads their pipes to end-of-file, which comes only "
            "when every write end is closed: a process that inherited them (a daemon grandchild the child started) "
            "keeps them open")
        _edges_pipe_holders(b, key, proc, zombies)
    _semlock_held_by_no_live_process(b, key)


# A holder that used this share of a CPU over its life, or runs now, works: it may end and close the pipe.
_HOLDER_BUSY_SHARE = 0.10


def _edges_pipe_holders(b: Builder, key: str, proc: Process, zombies: list[int | None]) -> None:
    """A parent whose children have exited polls pipes that other processes still hold the write
    end of (the probe's `pipe_holders`: a `communicate()` reading a child's stdout to end-of-file):
    each holder is what the read waits for. A process that inherited the pipe from the child (a
    daemon grandchild started without redirecting its output) closes it only when it exits: idle
    in an untimed wait, it never will (child-process-hang, the holder the culprit); asleep on a
    timer or working, it may end (a release: inconclusive, the holder named)."""
    info = b.inp.info.get(ProcessRef(proc.node_id, proc.pid)) or {}
    g = b.g
    for read in (r for r in info.get("pipe_holders") or [] if isinstance(r, dict)):
        pipe = f"pipe:[{read.get('inode')}] (fd {read.get('fd')})"
        for holder in (h for h in read.get("holders") or [] if isinstance(h, dict) and isinstance(h.get("pid"), int)):
            pid = int(holder["pid"])
            if pid == proc.pid or pid in zombies:
                continue
            dst = b.by_pid.get(ProcessRef(proc.node_id, pid)) or lock_holder_node(
                g, proc.node_id, holder, holds=f"the write end of {pipe}, which {g.nodes[key].name} polls for "
                                                "end-of-file (/proc/PID/fd of every process of the node)")
            if any(e.dst == dst for e in g.out(key)):
                continue
            node = g.nodes[dst]
            node.evidence.append(f"it is no child of {g.nodes[key].name} (its parent is pid {holder.get('ppid')}): it "
                                 f"inherited the pipe from the exited child pid {', '.join(str(z) for z in zombies[:3])} "
                                 "(a daemon started without redirecting its stdout/stderr)")
            if node.pattern is None or node.pattern in ("idle-worker", "child-process-wait"):
                node.pattern, node.state = "child-process-hang", "blocked"
                _holder_outcome(node, holder)
                choose(node, "pipe_held_by_daemon")
            g.add_edge(key, dst, "child-process-wait", f"reads {pipe} to end-of-file; its write end is held by pid {pid}")


def _sleeps_for_ever(holder: dict[str, Any]) -> bool:
    """A timed sleep longer than any a job waits out (`sleep infinity` asks nanosleep for years)."""
    asked = holder.get("sleep_request_s")
    return isinstance(asked, dict) and any(float(v) > MAX_TIMED_SLEEP_S for v in asked.values())


def _holder_outcome(node: GNode, holder: dict[str, Any]) -> None:
    """Whether a pipe's holder (read from /proc alone) may yet exit: working, or asleep on a timer,
    it may (`GNode.release`, never a hang); idle in an untimed wait, nothing ends it."""
    cpu, age = holder.get("cpu_s"), holder.get("age_s")
    share, life = None, "its CPU use unread"
    if isinstance(cpu, (int, float)) and isinstance(age, (int, float)) and age > 0:
        share, life = float(cpu) / float(age), f"{float(cpu):.2f} s of CPU in its {float(age):.0f} s"
    wchans = holder.get("wchan")
    names = sorted({str(w) for w in wchans.values()}) if isinstance(wchans, dict) else []
    if holder.get("state") == "R" or (share is not None and share >= _HOLDER_BUSY_SHARE):
        node.release = (f"its own work: it runs ({life}), and the pipe closes when it ends, if it does")
        node.evidence.append(f"it works ({life}): it may end and close the pipe")
    elif not names:
        node.release = f"what it does, which /proc does not show ({life})"
        node.evidence.append(f"where its threads sleep in the kernel could not be read ({life})")
    elif set(names) <= TIMED_SLEEP_WCHANS and not _sleeps_for_ever(holder):
        node.release = (f"a timed sleep ({names[0]}, {life}): it wakes by itself and may then exit and close the "
                        "pipe, or sleep again (a daemon that naps in a loop never closes it)")
        node.evidence.append(f"asleep in a timed sleep ({', '.join(names)}; {life}): it wakes by itself")
    else:
        node.evidence.append(f"idle in an untimed kernel wait ({', '.join(names)}; {life}): nothing in the job ends "
                             "it, so it never exits and the pipe never reaches end-of-file")


def _semlock_held_by_no_live_process(b: Builder, key: str) -> None:
    """Children that all wait to take a multiprocessing lock are not children that never exit.

    A SemLock is shared by the processes of one parent. When every live child waits to take it
    and the parent waits on the children, no child holds it: its holder is the parent (had it
    taken the lock before its wait: its stack does not show a lock it holds) or a process that
    ended inside it (a worker killed mid-`get`; a SemLock is never released for a process that
    dies). The children are that holder's victims, not the root cause; which holder it is does not
    show, so the wait stays a symptom (the chain is inconclusive, with what was seen)."""
    g = b.g
    kids = [e.dst for e in g.out(key) if e.why == "child-process-wait"]
    if not kids or not all(at_semlock_acquire(b.verdicts.get(k)) for k in kids):
        return
    if at_semlock_acquire(b.verdicts.get(key)):
        return  # the parent takes it too: one of the family may yet release it
    where = frame_text(g.nodes[kids[0]].user_frame or g.nodes[kids[0]].frame)
    for kid in kids:
        child = g.nodes[kid]
        child.pattern, child.state = "lock-wait", "blocked"
        child.evidence.append(
            f"waits to take a multiprocessing lock (a SemLock, shared by the processes of one parent) at {where}, "
            f"as every live child of {g.nodes[key].name} does ({len(kids)}), while the parent waits on them: no live "
            "process of the family holds it, unless the parent took it before its wait (a stack does not show the "
            "locks it holds). A SemLock is not released when its holder dies, so the holder is likely a process of "
            "this family that ended inside it (a worker killed in the middle of a queue's get); it has no stack to "
            "read. The children are its victims, not children that never exit")


_POOL_FILE = re.compile(r"(^|/)multiprocessing/pool\.py$")


_MP_QUEUE_FILE = re.compile(r"(^|/)multiprocessing/queues\.py$")


def _pool_worker_waiting_for_task(verdict: ProcessVerdict) -> bool:
    """A multiprocessing.Pool worker idle at its own fetch: pool.py's worker() inside the task
    queue's get (reading the pipe, or waiting for the queue's read lock a sibling holds while it
    reads), with no task code of its own on the stack."""
    for thread, _m in verdict.threads:
        frames = [f for f in thread.frames if not f.native]
        at = next((i for i, f in enumerate(frames) if _POOL_FILE.search(f.file) and f.name == "worker"), None)
        if at is None or thread.active:
            continue
        inner = frames[:at]
        # SimpleQueue.get (py-spy 0.3.14 prints a bare `get`: in queues.py under worker(), the same fetch)
        if any(_MP_QUEUE_FILE.search(f.file) and f.function.rsplit(".", 2)[-2:] in (["SimpleQueue", "get"], ["get"]) for f in inner) \
                and all(is_library(f) for f in inner):
            return True
    return False


def _handles_tasks(frame: Frame | None) -> bool:
    """multiprocessing.Pool's task-handler thread (`Pool._handle_tasks`, or bare with py-spy 0.3.14)."""
    return frame is not None and frame.name == "_handle_tasks" and bool(_POOL_FILE.search(frame.file))


def _pool_task_lost(b: Builder, key: str) -> bool:
    """A process waiting in multiprocessing.Pool for results while its pool holds no task.

    Every task was handed out (the pool's task-handler thread idle at its own queue) and every
    pool worker waits for a new one: the results waited for belong to a task no worker holds. A
    worker killed mid-task (SIGKILL, the OOM killer, os._exit) loses its task; Pool starts a
    replacement and never fails the result, so map/apply/get wait forever. The waiting process
    is where the fix goes (ProcessPoolExecutor raises BrokenProcessPool; a timeout on get).
    """
    verdict = b.verdicts[key]
    frame = verdict.main.frame if verdict.main else None
    if frame is None or not _POOL_FILE.search(frame.file):
        return False
    handing_out = [t for t, _m in verdict.threads if any(_handles_tasks(f) for f in t.frames)]
    if any(not _handles_tasks(next((f for f in t.frames if not f.native), None)) for t in handing_out):
        return False  # still sending tasks to the workers (pickling, a full pipe)
    proc = verdict.process
    children = [(pid, info) for (node_id, pid), info in b.inp.info.items()
                if info.get("child_of") == proc.pid and node_id == proc.node_id
                and not _HELPER_CHILD.search(str(info.get("title") or ""))]
    workers = [(pid, info) for pid, info in children
               if (k := b.by_pid.get(ProcessRef(proc.node_id, pid))) is not None and _pool_worker_waiting_for_task(b.verdicts[k])]
    if not workers or len(workers) != len(children):
        return False
    node = b.g.nodes[key]
    node.pattern, node.state = "pool-task-lost", "blocked"
    pids = ", ".join(str(pid) for pid, _ in workers)
    node.evidence.append(
        f"waits at {frame_text(verdict.main.user_frame or frame) if verdict.main else frame.function} for pool results, "
        f"yet its pool holds no task: every task was handed out and each pool worker (pid {pids}) waits for a new one — "
        "the task whose result is awaited died with its worker (killed, OOM, os._exit); Pool never fails that result")
    titles = sorted({str(info.get("title") or "") for _, info in workers} - {""})
    if len(titles) > 1:
        node.evidence.append(f"its pool workers were forked during different calls ({'; '.join(titles)}): the pool "
                             "replaced a worker that exited")
    return True


# A poll loop that tests a child's state (subprocess's poll()/wait()/returncode, multiprocessing's
# is_alive()/exitcode, os.waitpid) waits for that child, as Popen.wait() does.
_CHILD_STATE = re.compile(r"\.(poll|wait|is_alive)\s*\(|\.(returncode|exitcode)\b|\bos\.wait(pid|4)?\s*\(")


def follow_polled_children(b: Builder, key: str) -> bool:
    """A poll loop (a sleep in a loop) whose source tests a child process's state, in a process
    that has children: it waits for them, as Popen.wait() does. Each child's own state then
    decides (one that works is work in flight, one that waits is followed on). True when drawn."""
    verdict = b.verdicts.get(key)
    frame = verdict.main.user_frame if verdict is not None and verdict.main else None
    if verdict is None or frame is None or not any(_CHILD_STATE.search(line) for line in frame.context or []):
        return False
    before = len(b.g.out(key))
    _edges_children(b, key, verdict.process)
    if len(b.g.out(key)) == before:
        return False
    b.g.nodes[key].evidence.append(f"its loop at {frame_text(frame)} tests a child process's state: it waits for its children")
    return True


# Which end of a child's standard pipe its parent must act on, by descriptor: the child writes
# stdout/stderr (the parent must read) and reads stdin (the parent must write, or close it).
_PIPE_SIDES: dict[str, tuple[str, str, PatternId, str]] = {
    "1": ("stdout", "read", "pipe-write-wait", "wchar"),
    "2": ("stderr", "read", "pipe-write-wait", "wchar"),
    "0": ("stdin", "write", "pipe-read-wait", "rchar"),
}


def _edge_pipe_back(b: Builder, parent_key: str, child_key: str, info: dict[str, Any]) -> None:
    """A child asleep in the kernel on one of its standard pipes (catalog `pipe-write-wait`,
    `pipe-read-wait`: its wchan), silent on it over the sampling window (no byte written, or
    read), whose other end its parent holds: only the parent could move it (read the full
    stdout/stderr, or write or close stdin). The wait closes into a cycle: pipe-full-deadlock
    when the parent waits for the child to exit, child-awaits-input when the child reads its
    stdin while the parent reads its output (a prompt: nothing is full, nobody writes)."""
    io = ((info.get("progress") or {}).get("io") or {})
    child, parent = b.g.nodes[child_key], b.g.nodes[parent_key]
    verdict = b.verdicts.get(parent_key)
    if verdict is not None and other_threads_in_job_code(verdict, b.deciding.get(parent_key) or deciding_thread(verdict)):
        return  # another thread of the parent may read (or write, or close) the pipe between two samples
    pipes: dict[str, dict[str, Any]] = info.get("std_pipes") or {}
    # Other pipes the child sleeps writing (a multiprocessing.Queue's feeder thread flushing at
    # exit, an os.pipe()): the parent must read them, as a stdout.
    others: dict[str, dict[str, Any]] = {fd: p for fd, p in (info.get("other_pipes") or {}).items()
                                         if isinstance(p, dict) and "write" in (p.get("child_waits") or [])}
    for fd, pipe in sorted(pipes.items()) + sorted(others.items()):
        side = _PIPE_SIDES.get(fd) if fd in pipes else ("pipe", "read", "pipe-write-wait", "wchar")
        if side is None:
            continue
        stream, parent_end, pattern_id, counter = side
        if parent_end not in (pipe.get("parent_ends") or []):
            continue
        pattern = catalog().get(pattern_id)
        waits = pattern.kernel_waits if pattern is not None else ()
        asleep = sorted({str(name) for name in (info.get("wchan") or {}).values() if any(r.search(str(name)) for r in waits)})
        # Asleep on it, and not one byte moved over the whole sampling window: nobody acted on the
        # pipe (a parent reading it, in communicate() or a loop, lets the child write on).
        if not asleep or io.get(counter) != 0:
            continue
        if fd in pipes and "child_waits" in pipe and _CHILD_SIDE[fd] not in pipe["child_waits"]:
            continue  # the probe read the pipe the child sleeps on (its call's descriptor): another one
        where = f"its {stream} (fd {fd}, pipe:[{pipe['inode']}])"
        child.pattern, child.state = pattern_id, "blocked"  # the kernel says so, whatever py-spy shows
        read, write = _parent_reads(pipes), _parent_writes(pipes)
        if fd == "0" and read:
            _edge_prompt(b, parent_key, child_key, where, asleep, read)
        elif fd == "0":
            child.evidence.append(f"asleep in the kernel reading {where} ({', '.join(asleep)}), no byte read in the "
                                  f"sampling window; its parent {parent.label()} holds the write end")
            b.g.add_edge(child_key, parent_key, "pipe-read-wait",
                         f"blocked reading {where}: it waits for more input or end-of-file, and only the parent holds "
                         "the write end, but the parent waits for this child to exit instead of closing it")
        else:
            child.evidence.append(f"asleep in the kernel writing to a full pipe ({', '.join(asleep)}), no byte written in "
                                  f"the sampling window: {where}, whose read end its parent {parent.label()} holds"
                                  + (f"; the parent reads its {read} instead" if read else
                                     f"; the parent writes its {write} instead" if write else ""))
            if write or fd not in pipes:  # it writes the child's stdin, or waits to join it, instead of reading
                choose(parent, "pipe_stdin_written_first" if write else "mp_queue_joined_before_get")
            b.g.add_edge(child_key, parent_key, "pipe-write-wait",
                         f"blocked writing {where}: the pipe is full and only the parent holds its read end, "
                         "but the parent " + (f"reads its {read} instead" if read else
                                              f"writes its {write} instead: each waits for the other to read"
                                              if write else "waits for this child to exit instead of reading"))
        return


# Which side of each standard pipe a child's blocked call is on: it reads stdin, writes stdout/stderr.
_CHILD_SIDE = {"0": "read", "1": "write", "2": "write"}


def _parent_reads(pipes: dict[str, dict[str, Any]]) -> str | None:
    """The child's output pipe (stdout or stderr) that a thread of its parent sleeps reading
    (the probe's `parent_waits`: the thread's pipe_read wchan and its call's descriptor). A read
    of a pipe that holds bytes returns at once: that pipe is empty."""
    for fd in ("1", "2"):
        pipe = pipes.get(fd) or {}
        if "read" in (pipe.get("parent_waits") or []):
            return f"{_PIPE_SIDES[fd][0]} (fd {fd}, pipe:[{pipe.get('inode')}], empty: the read waits)"
    return None


def _waits_for_lock_of(info: dict[str, Any], pid: int | None) -> bool:
    """True when the process read in `info` waits (in /proc/locks) for a file lock `pid` holds."""
    return any(holder.get("pid") == pid for lock in info.get("file_locks") or [] if lock.get("waiting")
               for holder in lock.get("holders") or [])


def _parent_writes(pipes: dict[str, dict[str, Any]]) -> str | None:
    """The child's stdin when a thread of its parent sleeps writing it (the probe's `parent_waits`):
    a write that blocks means the pipe is full, so the child does not read it."""
    pipe = pipes.get("0") or {}
    if "write" in (pipe.get("parent_waits") or []):
        return f"stdin (fd 0, pipe:[{pipe.get('inode')}], full: the write waits)"
    return None


def _edge_prompt(b: Builder, parent_key: str, child_key: str, where: str, asleep: list[str], read: str) -> None:
    """The child reads its stdin, whose write end only the parent holds, while the parent reads
    the child's output: the child waits for input - an answer to a prompt - that the parent gives
    only after the output it waits for (child-awaits-input). No pipe is full; neither side writes."""
    child, parent = b.g.nodes[child_key], b.g.nodes[parent_key]
    child.evidence.append(f"asleep in the kernel reading {where} ({', '.join(asleep)}), no byte read in the sampling "
                          f"window; its parent {parent.label()} holds the only write end and sleeps reading the child's "
                          f"{read}: the child waits for input (a prompt), not on a full pipe")
    parent.evidence.append(f"sleeps reading the {read} of its child pid {child.pid}, which sleeps reading its stdin: "
                           "a line the child prints only after it gets the input this process never writes")
    b.g.add_edge(child_key, parent_key, "child-awaits-input",
                 f"blocked reading {where}: it waits for input (the answer to a prompt) that only the parent could "
                 f"write, and the parent reads this child's {read} instead of writing or closing stdin")


# A multiprocessing child's blocking read of what its parent sends: `conn.recv()` on an mp.Pipe
# end, `q.get()` on a multiprocessing.Queue (both read the pipe or socket the parent made).
_MP_RECEIVES = {("multiprocessing/connection.py", "recv"), ("multiprocessing/connection.py", "recv_bytes"),
                ("multiprocessing/queues.py", "get")}
# The parent's wait for the child to exit: Process.join (os.waitpid under it), Popen.wait.
_CHILD_EXIT_WAITS = {("multiprocessing/process.py", "join"), ("multiprocessing/popen_fork.py", "wait"),
                     ("subprocess.py", "wait")}
_SENDS = re.compile(r"(?P<obj>[\w.\[\]]+)\.(?:send|send_bytes|put)\(")
_NUMBERED_LINE = re.compile(r"^(?P<no>\d+):\s?(?P<code>.*)$")


def _calls_in(frame: Frame, names: set[tuple[str, str]]) -> bool:
    return any(frame.file.endswith(path) and frame.name == name for path, name in names)


def _sends_after(frame: Frame) -> str | None:
    """The first later line of `frame`'s function, in its source context, that sends or puts
    into a connection or queue (`parent_conn.send(cfg)`), or None."""
    lines = [(int(m.group("no")), m.group("code")) for text in frame.context or []
             if (m := _NUMBERED_LINE.match(text))]
    here = next((c for no, c in lines if no == frame.line), None)
    if here is None or frame.line is None:
        return None
    indent = len(here) - len(here.lstrip())
    for no, code in lines:
        if no <= frame.line or not code.strip():
            continue
        if len(code) - len(code.lstrip()) < indent or code.lstrip().startswith(("def ", "class ")):
            return None  # out of the block the wait is in: what follows may not run after it
        if _SENDS.search(code):
            return f"line {no} `{code.strip()}`"
    return None


def _edge_sent_after_join(b: Builder, parent_key: str, child_key: str) -> None:
    """A child blocked, with no timeout, reading a multiprocessing Pipe or Queue (`conn.recv()`)
    while its parent waits for it to exit (Process.join, Popen.wait) at a line its source follows
    with a send or put (`proc.join()` then `parent_conn.send(cfg)`): the child waits for what only
    the parent would send, and the parent sends only once the child has exited. The wait closes
    into a cycle (pipe-full-deadlock), the parent's join the line to change."""
    child_v, parent_v = b.verdicts.get(child_key), b.verdicts.get(parent_key)
    if child_v is None or parent_v is None or any(e.dst == parent_key for e in b.g.out(child_key)):
        return
    reader = b.deciding.get(child_key) or deciding_thread(child_v)
    joiner = b.deciding.get(parent_key) or deciding_thread(parent_v)
    if reader is None or joiner is None or reader.active or joiner.active:
        return
    if other_threads_in_job_code(child_v, reader) or other_threads_in_job_code(parent_v, joiner):
        return  # another thread of either may send, or exit the child
    lib = [f for f in reader.frames if not f.native]
    if not lib or not any(_calls_in(f, _MP_RECEIVES) for f in lib[:4]) or waits_with_timeout(reader):
        return
    if not any(_calls_in(f, _CHILD_EXIT_WAITS) for f in joiner.frames if not f.native):
        return
    at = job_frame(joiner)
    if at is None or (sent := _sends_after(at)) is None:
        return
    child, parent = b.g.nodes[child_key], b.g.nodes[parent_key]
    where = job_frame(reader)
    child.pattern, child.state = "pipe-read-wait", "blocked"
    child.evidence.append("blocked reading a multiprocessing connection with no timeout"
                          + (f" at {frame_text(where)}" if where else "")
                          + f": it waits for what its parent {parent.label()} sends")
    parent.evidence.append(f"waits for child pid {child.pid} to exit at {frame_text(at)}, and sends to it only after "
                           f"that ({sent}): the child waits for that send")
    choose(parent, "mp_sent_after_join")
    b.g.add_edge(child_key, parent_key, "pipe-read-wait",
                 f"blocked in a multiprocessing receive for what only the parent sends, and the parent sends it "
                 f"only after this child exits ({sent})")


# Kernel functions a thread sleeps in during a timed sleep (nanosleep/clock_nanosleep): it wakes by itself.
TIMED_SLEEP_WCHANS = frozenset({"hrtimer_nanosleep", "do_nanosleep", "clock_nanosleep", "common_nsleep"})
MAX_TIMED_SLEEP_S = 6 * 3600.0  # a longer sleep (`sleep infinity`: years) is not a wait that ends soon


def _note_timed_sleep(child: GNode, info: dict[str, Any]) -> None:
    """A child with no Python stack whose every thread sleeps in a timed sleep (the probe's
    `wchan`: hrtimer_nanosleep - a native `sleep 240`, a script's back-off): its wait ends by
    itself, so the chain's end is a scheduled release (`GNode.release`), never a hang."""
    wchans = info.get("wchan")
    if not isinstance(wchans, dict) or not wchans:
        return
    names = {str(w) for w in wchans.values()}
    asked = info.get("sleep_request_s")
    if not isinstance(asked, dict) or set(asked) != set(wchans):
        return  # how long each sleep lasts is not known (`sleep infinity` sleeps in nanosleep too)
    longest = max(float(v) for v in asked.values())
    if names <= TIMED_SLEEP_WCHANS and longest <= MAX_TIMED_SLEEP_S:
        child.release = (f"a timed sleep of {longest:.0f} s: every thread of the child sleeps in the kernel's "
                         f"{sorted(names)[0]} (nanosleep), which ends by itself")
        child.evidence.append(f"asleep in a timed sleep ({', '.join(sorted(names))}): it wakes by itself")
