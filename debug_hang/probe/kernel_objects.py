"""Waits on kernel objects whose other party is another process of the node, read from /proc
(node side, stdlib only). py-spy shows only the Python line of the C call; the kernel knows more:

- a thread blocked in open() of a FIFO (named pipe) sleeps in `wait_for_partner` until some
  process opens the other end. It has no descriptor yet: the path is the system call's argument
  (/proc/PID/task/TID/syscall gives its address, /proc/PID/mem the bytes, as py-spy reads
  memory). Who holds the FIFO open, and at which end, is read from every process's descriptors.
- a thread that sleeps in C (`hrtimer_nanosleep`) between tries of a file lock: SQLite's busy
  handler retries its POSIX locks with F_SETLK and sleeps, so /proc/locks lists the holder but no
  waiter (`->`). The locks other processes hold on files this process has open are read here.

Read-only and bounded: nothing is stat'ed (a hung network filesystem would block the probe);
paths come from descriptor links and the wait's own argument.
"""

from __future__ import annotations

import os
import re
from typing import Any

from debug_hang.probe.file_locks import process_title, thread_syscall
from debug_hang.probe.procfd import MAX_FDS, fd_links

# The kernel function a reader or writer opening a FIFO sleeps in until the other end is opened.
FIFO_WAITS = re.compile(r"^(wait_for_partner|fifo_open)$")
# A sleep for a set time (nanosleep, clock_nanosleep, usleep): a retry loop's pause, in C or Python.
SLEEPS = re.compile(r"nanosleep$")
# The open system calls, per machine: number -> (dirfd argument or None, path argument, flags argument).
_OPENS: dict[str, dict[str, tuple[int | None, int, int]]] = {
    "x86_64": {"2": (None, 0, 1), "257": (0, 1, 2), "437": (0, 1, 2)},
    "aarch64": {"56": (0, 1, 2), "437": (0, 1, 2)},
}
_AT_FDCWD = (-100 & 0xFFFFFFFF, -100 & 0xFFFFFFFFFFFFFFFF)
MAX_PATH = 4096
# Processes whose descriptors are read to find who holds a FIFO open (a node runs fewer).
MAX_PROCESSES = 4096


def read_string(pid: int, address: int, limit: int = MAX_PATH) -> str | None:
    """The NUL-terminated string at `address` in `pid`'s memory (at most `limit` bytes), or None
    when it cannot be read (another user's process, an address gone)."""
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        out = b""
        while len(out) < limit:
            # One page at a time: a read across a page that is not mapped fails as a whole.
            chunk = os.pread(fd, min(4096 - (address + len(out)) % 4096, limit - len(out)), address + len(out))
            if not chunk:
                break
            out += chunk
            if b"\0" in chunk:
                break
    except (OSError, OverflowError, ValueError):
        return None
    finally:
        os.close(fd)
    text, nul, _ = out.partition(b"\0")
    return text.decode("utf-8", "surrogateescape") if nul else None


def fifo_open_of(pid: int, tid: int, machine: str) -> dict[str, Any] | None:
    """The open() thread `tid` of `pid` is blocked in: {"path", "access": "read"|"write", "syscall"};
    None when its system call is no open this module knows or its argument cannot be read."""
    call = thread_syscall(pid, tid)
    known = _OPENS.get(machine, {})
    if call is None or call[0] not in known:
        return None
    dirfd_at, path_at, flags_at = known[call[0]]
    args = [int(a, 16) for a in call[1:]]
    path = read_string(pid, args[path_at])
    if not path:
        return None
    if not path.startswith("/"):
        base = _dir_of(pid, None if dirfd_at is None else args[dirfd_at])
        if base is None:
            return None
        path = os.path.join(base, path)
    # O_RDONLY (0) waits for a writer, O_WRONLY (1) for a reader; openat2 passes a struct, not flags.
    access = "read" if args[flags_at] & os.O_ACCMODE == os.O_RDONLY else "write"
    return {"path": os.path.normpath(path), "access": "?" if call[0] == "437" else access, "syscall": call[0]}


def _dir_of(pid: int, dirfd: int | None) -> str | None:
    """The folder a relative path of `pid` is looked up in: its cwd, or the descriptor `dirfd`."""
    link = f"/proc/{pid}/cwd" if dirfd is None or dirfd in _AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
    try:
        return os.readlink(link)
    except OSError:
        return None


def _end_of(pid: int, fd: str) -> str:
    """The access mode of one descriptor (its fdinfo flags): read, write or both."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as fh:
            line = next((ln for ln in fh.read(4096).splitlines() if ln.startswith("flags:")), "")
        mode = int(line.split()[1], 8) & os.O_ACCMODE
    except (OSError, IndexError, ValueError):
        return "?"
    return {os.O_RDONLY: "read", os.O_WRONLY: "write"}.get(mode, "both")


def fifo_holders(paths: set[str], max_processes: int = MAX_PROCESSES) -> dict[str, Any]:
    """Every process of the node (this PID namespace) with one of `paths` open, and at which end:
    {"holders": {path: [{"pid", "title", "ends"}]}, "scanned": n, "unreadable": n} (a process whose
    descriptors could not be read may hold one; `unreadable` counts them)."""
    holders: dict[str, list[dict[str, Any]]] = {p: [] for p in paths}
    scanned = unreadable = 0
    entries = [e for e in os.listdir("/proc") if e.isdigit()][:max_processes]
    for entry in entries:
        pid = int(entry)
        if pid == os.getpid():
            continue
        try:
            os.listdir(f"/proc/{pid}/fd")
        except PermissionError:
            unreadable += 1
            continue
        except OSError:
            continue  # gone
        scanned += 1
        ends: dict[str, list[str]] = {}
        for fd, link in fd_links(pid, MAX_FDS):
            path = link[:-len(" (deleted)")] if link.endswith(" (deleted)") else link
            if path in holders:
                ends.setdefault(path, []).append(_end_of(pid, fd))
        for path, found in ends.items():
            holders[path].append({"pid": pid, "title": process_title(pid), "ends": sorted(set(found))})
    return {"holders": holders, "scanned": scanned, "unreadable": unreadable}


def fifo_opens(waiting: dict[int, list[tuple[int, str]]], machine: str) -> dict[int, list[dict[str, Any]]]:
    """For each pid with threads asleep in a FIFO open ({pid: [(tid, wchan)]}): those opens, each
    with the FIFO's path, the end it opens and the processes that hold the FIFO open (`holders`,
    `scanned`, `unreadable`: one walk of the node's descriptors for all of them)."""
    found: dict[int, list[dict[str, Any]]] = {}
    for pid, threads in waiting.items():
        for tid, wchan in threads:
            opened = fifo_open_of(pid, tid, machine)
            found.setdefault(pid, []).append({"tid": tid, "wchan": wchan, **(opened or {"path": None})})
    paths = {o["path"] for opens in found.values() for o in opens if o["path"]}
    if paths:
        walk = fifo_holders(paths)
        for opens in found.values():
            for o in opens:
                if o["path"]:
                    o.update(holders=walk["holders"][o["path"]], scanned=walk["scanned"], unreadable=walk["unreadable"])
    return found


def _mounts(pid: int) -> dict[str, tuple[int, int]]:
    """{mount id: (major, minor)} of `pid`'s mounts (/proc/PID/mountinfo), to match a descriptor's
    mnt_id with the device /proc/locks names."""
    out: dict[str, tuple[int, int]] = {}
    try:
        with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh.read(1 << 20).splitlines():
                parts = line.split()
                major, _, minor = parts[2].partition(":") if len(parts) > 2 else ("", "", "")
                if major.isdigit() and minor.isdigit():
                    out[parts[0]] = (int(major), int(minor))
    except OSError:
        pass
    return out


def _lock_dev(dev: str) -> tuple[int, int] | None:
    """/proc/locks' "fe:00" as (major, minor)."""
    major, _, minor = dev.partition(":")
    try:
        return int(major, 16), int(minor, 16)
    except ValueError:
        return None


def _fd_facts(pid: int, fd: str) -> tuple[int | None, str | None]:
    """(inode, mount id) of one descriptor, from its fdinfo (kernel memory: never a stat)."""
    try:
        with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as fh:
            lines = fh.read(4096).splitlines()
    except OSError:
        return None, None
    fields = dict(ln.split(":", 1) for ln in lines if ":" in ln)
    inode, mnt = fields.get("ino", "").strip(), fields.get("mnt_id", "").strip()
    return (int(inode) if inode.isdigit() else None), (mnt or None)


# SQLite's unix write-lock bytes (sqlite3 os_unix.c: PENDING at 0x40000000, RESERVED after it, then
# the SHARED range an EXCLUSIVE lock takes whole): "start end" as /proc/locks prints a range.
_SQLITE_WRITE_RANGES = frozenset({f"{0x40000000} {0x40000000}", f"{0x40000001} {0x40000001}",
                                  f"{0x40000002} {0x40000002 + 509}"})


def locks_held_by_others(pid: int, rows: list[dict[str, Any]], max_fds: int = MAX_FDS) -> list[dict[str, Any]]:
    """The files `pid` has open on which other live processes hold POSIX or OFD locks (/proc/locks
    `rows`, file_locks.read_locks): [{"path", "dev", "inode", "holders": [{"pid", "title", "locks":
    [{"type", "access", "range"}]}]}]. What a thread retrying a lock in C (SQLite's busy handler)
    waits for: the kernel lists no waiter, the holder only. SQLite's write locks held by `pid`
    itself are kept too: POSIX locks belong to the process, so a second connection of the same
    process that wants to write is refused by SQLite's own bookkeeping, not by the kernel, and
    its busy handler retries a lock its own process holds."""
    held: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
    for row in rows:
        dev = _lock_dev(row["dev"])
        mine = row["pid"] == pid and row["type"] == "POSIX" and row["access"] == "WRITE" \
            and row["range"] in _SQLITE_WRITE_RANGES
        if not row["waiting"] and (row["pid"] != pid or mine) and row["type"] in ("POSIX", "OFDLCK") and dev is not None:
            held.setdefault((*dev, row["inode"]), []).append(row)
    if not held:
        return []
    inodes = {k[2] for k in held}
    mounts: dict[str, tuple[int, int]] | None = None
    out: list[dict[str, Any]] = []
    for fd, link in fd_links(pid, max_fds):
        if not link.startswith("/"):
            continue  # a pipe, socket or anonymous inode
        inode, mnt = _fd_facts(pid, fd)
        if inode not in inodes or mnt is None:
            continue
        mounts = _mounts(pid) if mounts is None else mounts
        dev = mounts.get(mnt)
        locks = held.get((*dev, inode)) if dev is not None and inode is not None else None
        if not locks or any(o["inode"] == inode and o["path"] == link for o in out):
            continue
        by_pid: dict[int, list[dict[str, Any]]] = {}
        for row in locks:
            by_pid.setdefault(row["pid"], []).append({"type": row["type"], "access": row["access"], "range": row["range"]})
        out.append({"path": link, "dev": locks[0]["dev"], "inode": inode,
                    "holders": [{"pid": p, "title": process_title(p), "locks": ls} for p, ls in sorted(by_pid.items())
                                if os.path.exists(f"/proc/{p}")]})
    return [o for o in out if o["holders"]]
