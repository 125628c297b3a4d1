"""Pipes between a child process and its parent, read from /proc (node side, stdlib only).

A child blocked writing its stdout into a pipe that its parent never reads (the parent is in
`Popen.wait()`) is stuck in the kernel: py-spy shows only the `print`/`write` line. What decides
is the kernel function its threads sleep in (/proc/PID/task/TID/wchan: `pipe_write`, or
`anon_pipe_write` on newer kernels) and who holds the other end of that pipe. This module reads
both facts; the analysis (analyse/graph.py, catalog `pipe-write-wait`) decides from them.
Nothing is stat'ed or opened but /proc entries; every scan is bounded.
"""

from __future__ import annotations

import os
import re
from typing import Any

from debug_hang.probe.file_locks import thread_syscall, thread_wchans
from debug_hang.probe.procfd import MAX_FDS, fd_links
from debug_hang.probe.socket_peers import waited_fds

_PIPE = re.compile(r"^pipe:\[(\d+)\]$")
STD_FDS = ("0", "1", "2")


def std_pipes(pid: int) -> dict[str, int]:
    """{fd: pipe inode} for those of stdin/stdout/stderr of `pid` that are pipes."""
    found: dict[str, int] = {}
    for fd in STD_FDS:
        try:
            match = _PIPE.match(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
        if match:
            found[fd] = int(match.group(1))
    return found


def pipe_ends(pid: int, inodes: set[int], max_fds: int = MAX_FDS) -> dict[int, list[str]]:
    """{inode: ["read"|"write", ...]}: which ends of the pipes `inodes` process `pid` holds open
    (from the access mode in /proc/PID/fdinfo), scanning at most `max_fds` descriptors."""
    held: dict[int, list[str]] = {}
    for fd, link in fd_links(pid, max_fds):
        match = _PIPE.match(link)
        if not match or int(match.group(1)) not in inodes:
            continue
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as fh:
                flags_line = next((ln for ln in fh.read(4096).splitlines() if ln.startswith("flags:")), "")
        except OSError:
            continue
        flags = int(flags_line.split()[1], 8) if flags_line.split()[1:] else 0
        end = "read" if flags & os.O_ACCMODE == os.O_RDONLY else "write"
        held.setdefault(int(match.group(1)), []).append(end)
    return held


# The kernel functions a thread sleeps in inside a read or a write of a pipe (`anon_` on newer kernels).
_PIPE_WAIT = re.compile(r"(^|_)pipe_(read|write)$")


def blocked_pipes(pid: int, tids: list[int] | None = None, max_fds: int = MAX_FDS) -> list[tuple[str, str, str, int]]:
    """[(tid, "read"|"write", fd, inode)]: the threads of `pid` (those in `tids`, or all) asleep in
    a read or a write of a pipe. The thread's wchan says which (pipe_read / pipe_write) and its
    system call's first argument is the descriptor (read, readv, write, writev all take it first),
    which /proc/PID/fd names: the one blocked pipe, whatever the machine numbers its calls."""
    wchans = {tid: m.group(2) for tid, name in thread_wchans(pid, tids=tids).items() if (m := _PIPE_WAIT.search(name))}
    if not wchans:
        return []
    links = dict(fd_links(pid, max_fds))
    found: list[tuple[str, str, str, int]] = []
    for tid, direction in wchans.items():
        call = thread_syscall(pid, int(tid)) if str(tid).isdigit() else None
        try:
            fd = str(int(call[1], 16)) if call else None
        except ValueError:
            continue
        match = _PIPE.match(links.get(fd or "", ""))
        if fd is not None and match:
            found.append((str(tid), direction, fd, int(match.group(1))))
    return found


def pipe_waits(pid: int, inodes: set[int], max_fds: int = MAX_FDS) -> dict[int, list[str]]:
    """{inode: ["read"|"write", ...]}: the pipes among `inodes` that a thread of `pid` sleeps in a
    read or a write of (blocked_pipes)."""
    waits: dict[int, list[str]] = {}
    for _tid, direction, _fd, inode in blocked_pipes(pid, max_fds=max_fds):
        if inode in inodes:
            waits.setdefault(inode, []).append(direction)
    return waits


def child_pipes(child: int, parent: int | None) -> dict[str, Any] | None:
    """For a child process: the kernel functions its threads sleep in and, for each of its
    standard descriptors that is a pipe, whether its parent holds the pipe's read or write end
    and which side of it a thread of the child, or of the parent, sleeps on (a read or a write):
    {"wchan": {tid: name}, "std_pipes": {fd: {"inode", "parent_ends": [...], "child_waits": [...],
    "parent_waits": [...]}}}; None when the child has no pipe on 0/1/2."""
    pipes = std_pipes(child)
    # Other pipes the child sleeps writing (a multiprocessing.Queue's feeder thread, an os.pipe()):
    # only those, since a process holds many pipes it never blocks on.
    others = {fd: inode for fd, inode in _blocked_writes(child).items() if fd not in STD_FDS}
    if not pipes and not others:
        return None
    inodes = set(pipes.values()) | set(others.values())
    ends = pipe_ends(parent, inodes) if parent else {}
    mine = pipe_waits(child, inodes)
    theirs = pipe_waits(parent, inodes) if parent else {}

    def described(found: dict[str, int]) -> dict[str, dict[str, Any]]:
        return {fd: {"inode": inode, "parent_ends": sorted(set(ends.get(inode, []))),
                     "child_waits": sorted(set(mine.get(inode, []))),
                     "parent_waits": sorted(set(theirs.get(inode, [])))}
                for fd, inode in found.items()}

    found: dict[str, Any] = {"wchan": thread_wchans(child), "std_pipes": described(pipes)}
    if others:
        found["other_pipes"] = described(others)
    return found


def _blocked_writes(pid: int) -> dict[str, int]:
    """{fd: pipe inode} of the pipes a thread of `pid` sleeps writing."""
    return {fd: inode for _tid, direction, fd, inode in blocked_pipes(pid) if direction == "write"}


MAX_SCANNED = 4096  # processes of the node whose descriptors are walked for a pipe's writers


def widowed_pipes(pid: int, max_procs: int = MAX_SCANNED) -> list[int] | None:
    """Pipes `pid` holds the read end of whose write end no process of this node holds any more
    (every writer closed it or ended): a child's sentinel pipe once the child exited
    (multiprocessing keeps the read end of each child it started). [inode], or None when not every
    process of that user could be read (a writer may hide among them)."""
    reads = {inode for inode, ends in pipe_ends(pid, _pipe_inodes(pid)).items() if "read" in ends}
    if not reads:
        return []
    writers = pipe_writers(pid, reads, max_procs)
    return None if writers is None else sorted(inode for inode in reads if not writers.get(inode))


def pipe_writers(pid: int, inodes: set[int], max_procs: int = MAX_SCANNED) -> dict[int, list[int]] | None:
    """{inode: [pid, ...]}: the processes of this node that hold the write end of each pipe in
    `inodes` (`pid` itself included). Processes of another user than `pid`'s are not looked at: a
    descriptor is inherited by children, which keep their parent's user. None when not every
    process of that user could be read (a writer may hide among them)."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    if len(pids) > max_procs:
        return None
    writers: dict[int, list[int]] = {}
    for other in pids:
        try:
            if os.stat(f"/proc/{other}").st_uid != uid:
                continue
            os.listdir(f"/proc/{other}/fd")
        except FileNotFoundError:
            continue  # ended while we looked
        except OSError:
            return None  # unreadable: it may hold a write end
        for inode, ends in pipe_ends(other, inodes).items():
            if "write" in ends:
                writers.setdefault(inode, []).append(other)
    return writers


# The kernel function a thread sleeps in inside a read of an empty pipe (`anon_` on newer kernels).
PIPE_READ_WAIT = re.compile(r"(^|_)pipe_read$")


def pipe_reads(readers: dict[int, list[int]]) -> dict[int, list[dict[str, Any]]]:
    """Per process of `readers` ({pid: tids}), its threads among those tids asleep reading an empty
    pipe on a descriptor other than stdin/stdout/stderr (those of a child are read by child_pipes):
    an os.pipe() the process reads as a queue. Each: {"tid", "fd", "inode", "writers": [pid, ...] |
    None} — the processes of the node that hold the pipe's write end (None: not every process could
    be read). One walk of the node's descriptors serves every reader of the same user."""
    found: dict[int, list[dict[str, Any]]] = {}
    for pid, tids in readers.items():
        reads: list[dict[str, Any]] = [{"tid": int(tid), "fd": int(fd), "inode": inode}
                                       for tid, direction, fd, inode in blocked_pipes(pid, tids)
                                       if direction == "read" and fd not in STD_FDS]
        if reads:
            found[pid] = reads
    walks: dict[int | None, dict[int, list[int]] | None] = {}
    for pid, reads in found.items():
        uid = _uid(pid)
        if uid not in walks:
            same = [p for p in found if _uid(p) == uid]
            walks[uid] = pipe_writers(pid, {r["inode"] for p in same for r in found[p]})
        writers = walks[uid]
        for read in reads:
            read["writers"] = None if writers is None else sorted(writers.get(read["inode"], []))
    return found


def _uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _pipe_inodes(pid: int) -> set[int]:
    """The pipes `pid` holds on descriptors other than stdin/stdout/stderr (a sentinel is never one
    of those; a stdin whose writer finished says nothing of a child)."""
    return {int(m.group(1)) for fd, link in fd_links(pid) if fd not in STD_FDS and (m := _PIPE.match(link))}


MAX_POLLED_READERS = 8  # threads per process whose polled pipes are followed to their writers


def polled_pipes(pid: int, tids: list[int]) -> list[dict[str, Any]]:
    """For the threads `tids` of `pid` asleep in poll/ppoll, the pipes among the polled descriptors
    whose read end `pid` holds (what `Popen.communicate` waits on: a child's stdout and stderr,
    read to end-of-file), and the other processes of the node that hold their write end:
    [{"tid", "fd", "inode", "writers": [pid, ...] | None}] (None: not every process of that user
    could be read). End-of-file comes only once every write end is closed, so each writer is a
    process the reader waits for. Read-only and bounded; [] when no thread polls a pipe."""
    reads: list[dict[str, Any]] = []
    for tid in tids[:MAX_POLLED_READERS]:
        call = thread_syscall(pid, tid)
        if call is None:
            continue
        for fd in waited_fds(pid, call):
            if str(fd) in STD_FDS:
                continue
            try:
                match = _PIPE.match(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if match and "read" in pipe_ends(pid, {int(match.group(1))}).get(int(match.group(1)), []):
                reads.append({"tid": int(tid), "fd": int(fd), "inode": int(match.group(1))})
    if not reads:
        return []
    writers = pipe_writers(pid, {r["inode"] for r in reads})
    for read in reads:
        read["writers"] = None if writers is None else sorted(p for p in writers.get(read["inode"], []) if p != pid)
    return reads
