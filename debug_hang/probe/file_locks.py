"""OS file locks and kernel waits of a node's processes, read from /proc (node side, stdlib only).

Ray knows nothing of `fcntl.flock`/`lockf`/`fcntl` locks: a process blocked on one is idle in
py-spy at the line of the call, with no frame for it. The kernel knows: `/proc/locks` lists every
lock with the PID that holds it and, prefixed `->`, the PIDs blocked waiting for it, by device and
inode; `/proc/PID/task/TID/wchan` names the kernel function a thread sleeps in. This module reads
both for the probed processes, read-only and bounded (bytes, lines, threads, descriptors), and
maps each lock's inode to a path through the open descriptors of its holder or waiter.
"""

from __future__ import annotations

import os
from typing import Any

from debug_hang.probe.procfd import MAX_FDS, fd_links

# /proc/locks of a busy node can list tens of thousands of locks: stop reading after this much.
MAX_LOCKS_BYTES = 2 * 2**20
# Threads per process whose wchan is read (a process with more is unusual; the rest are skipped).
MAX_THREADS = 512


def thread_wchans(pid: int, max_threads: int = MAX_THREADS, tids: list[int] | None = None) -> dict[str, str]:
    """{tid: kernel function the thread sleeps in} for the threads of `pid` (or those of `tids`)
    that sleep in one (a running thread, or one whose wchan the kernel hides, reads "0" and is left out)."""
    if tids is not None:
        names = [str(t) for t in tids]
    else:
        try:
            names = sorted(os.listdir(f"/proc/{pid}/task"), key=lambda t: int(t) if t.isdigit() else 0)
        except OSError:
            return {}
    found: dict[str, str] = {}
    for tid in names[:max_threads]:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan", encoding="ascii", errors="replace") as fh:
                name = fh.read(128).strip()
        except OSError:
            continue
        if name and name != "0":
            found[tid] = name
    return found


def thread_syscall(pid: int, tid: int) -> list[str] | None:
    """The system call thread `tid` of `pid` sleeps in, as /proc/PID/task/TID/syscall gives it:
    its number and its first four arguments (["232", "0x3", "0x7ffc..", "0x400", "0xffffffff"]);
    None when the thread runs, the kernel hides it, or the file cannot be read."""
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", encoding="ascii", errors="replace") as fh:
            fields = fh.read(512).split()
    except OSError:
        return None
    if len(fields) < 5 or not fields[0].isdigit():
        return None  # "running", or "-1 ..." (not in a system call)
    return fields[:5]


def parse_locks(text: str) -> list[dict[str, Any]]:
    """Rows of /proc/locks: {"n", "waiting", "type", "mode", "access", "pid", "dev", "inode", "range"}.

    `1: FLOCK  ADVISORY  WRITE 7346 fe:00:2147089 0 EOF` is lock 1 held by pid 7346;
    `1: -> FLOCK  ADVISORY  WRITE 7387 fe:00:2147089 0 EOF` is pid 7387 blocked waiting for it.
    Lines that do not parse are skipped (a lock with pid -1 or a truncated last line).
    """
    rows: list[dict[str, Any]] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 7 or not parts[0].endswith(":"):
            continue
        waiting = parts[1] == "->"
        fields = parts[2:] if waiting else parts[1:]
        if len(fields) < 6:
            continue
        kind, mode, access, pid_text, ident = fields[0], fields[1], fields[2], fields[3], fields[4]
        dev, _, inode = ident.rpartition(":")
        if not pid_text.lstrip("-").isdigit() or not inode.isdigit() or int(pid_text) <= 0:
            continue
        rows.append({"n": parts[0].rstrip(":"), "waiting": waiting, "type": kind, "mode": mode,
                     "access": access, "pid": int(pid_text), "dev": dev, "inode": int(inode),
                     "range": " ".join(fields[5:7])})
    return rows


def read_locks(path: str = "/proc/locks", max_bytes: int = MAX_LOCKS_BYTES) -> tuple[list[dict[str, Any]], bool]:
    """Parsed /proc/locks and whether it was cut at `max_bytes`; ([], False) when unreadable."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError:
        return [], False
    cut = len(raw) > max_bytes
    text = raw[:max_bytes].decode("ascii", "replace")
    if cut:
        text = text.rsplit("\n", 1)[0]  # drop the partial last line
    return parse_locks(text), cut


def _fd_inode(pid: int, fd: str) -> tuple[int | None, str]:
    """(inode, lock lines) of one descriptor from /proc/PID/fdinfo/FD. Never stats the file: a
    stat on a hung network filesystem would block the probe; fdinfo is kernel memory."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as fh:
            text = fh.read(4096)
    except OSError:
        return None, ""
    inode = next((line.split()[1] for line in text.splitlines() if line.startswith("ino:")), None)
    return (int(inode) if inode and inode.isdigit() else None), text


def file_of(pid: int, dev: str, inode: int, max_fds: int = MAX_FDS) -> str | None:
    """The path of the file (dev, inode) as `pid` has it open, from its /proc/PID/fd links: the
    descriptor whose fdinfo lock line names dev:inode, else the first one with that inode."""
    candidate: str | None = None
    for fd, link in fd_links(pid, max_fds):
        ino, text = _fd_inode(pid, fd)
        if ino != inode:
            continue
        if f" {dev}:{inode} " in text:
            return link
        candidate = candidate or link
    return candidate


def _holds_lock_fd(pid: int, dev: str, inode: int, max_fds: int = MAX_FDS) -> bool:
    """True when one of `pid`'s descriptors carries the lock on dev:inode (its fdinfo lock line)."""
    mark = f" {dev}:{inode} "
    for fd, _ in fd_links(pid, max_fds):
        ino, text = _fd_inode(pid, fd)
        if ino == inode and any(line.startswith("lock:") and mark in line and "->" not in line
                                for line in text.splitlines()):
            return True
    return False


def process_title(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read(512)
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip() or None


def locks_of(pids: list[int], rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """For each of `pids` that waits for a lock, or holds one someone waits for: those locks, each
    with the file's path and, for a wait, its holders (pid, title), for a lock held, its waiters."""
    wanted = set(pids)
    by_lock: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for row in rows:
        by_lock.setdefault((row["n"], row["dev"], row["inode"]), []).append(row)
    out: dict[int, list[dict[str, Any]]] = {}
    paths: dict[tuple[str, int], str | None] = {}
    for (_n, dev, inode), group in by_lock.items():
        mine = [r for r in group if r["pid"] in wanted]
        holders = [r for r in group if not r["waiting"]]
        waiters = [r for r in group if r["waiting"]]
        if not mine or not waiters:
            continue  # a lock nobody waits for holds nobody up (and costs no descriptor scan)
        if (dev, inode) not in paths:
            paths[(dev, inode)] = next((p for p in (file_of(r["pid"], dev, inode) for r in mine + holders) if p), None)
        for row in mine:
            entry = {"type": row["type"], "mode": row["mode"], "access": row["access"], "dev": dev,
                     "inode": inode, "path": paths[(dev, inode)], "waiting": row["waiting"]}
            if row["waiting"]:
                entry["holders"] = [{"pid": h["pid"], "title": process_title(h["pid"])} for h in holders
                                    if os.path.exists(f"/proc/{h['pid']}")]
                if holders and not entry["holders"]:
                    # The pid that took the lock has exited: a flock belongs to the open file,
                    # so whoever inherited the descriptor (a forked child) holds it now.
                    entry["holders"] = [{"pid": pid, "title": process_title(pid), "inherited_from": holders[0]["pid"]}
                                        for pid in pids if pid != row["pid"] and _holds_lock_fd(pid, dev, inode)]
            else:
                entry["waiters"] = sorted({w["pid"] for w in waiters})
            out.setdefault(row["pid"], []).append(entry)
    return out
