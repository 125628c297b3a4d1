"""The local processes at the other end of a process's TCP connections, read from /proc (node
side, stdlib only).

gloo pairs every two ranks of a process group by a TCP connection, NCCL bootstraps over TCP, a
TCPStore is a TCP server: a rank's TCP peers on its node include the other members of its groups
that run there, whoever started them. A member that is not a process of the job (another job's
detached actor, a process started outside Ray) shows up only this way. This module lists, for
each target, the processes on this node holding the other end of its ESTABLISHED TCP connections,
and how many; what they mean is for the analysis. Only /proc entries are read (fd links,
/proc/PID/net/tcp{,6}); every scan is bounded (descriptors per process, rows, a time budget).
For a thread retrying a connect, `connect_targets` says whether anything listens on the port it
dials, in the process's own network namespace (a loopback port with no listener refuses at once).
For a thread in accept, `accept_sockets` names the listening socket it waits on (port or path),
from the call's descriptor argument; for a thread in a socket read, `reading_sockets` gives that
connection's traffic (bytes received, how long ago data last came: probe/tcp_info.py).
"""

from __future__ import annotations

import os
import platform
import re
import struct
import time
from collections.abc import Iterator
from typing import Any

from debug_hang.facts import CONNECT_FRAME, LOOPBACK_FACT, SOCKET_READ_FRAME
from debug_hang.probe.file_locks import thread_syscall
from debug_hang.probe.procfd import MAX_FDS, fd_links
from debug_hang.probe.tcp_info import same_netns, tcp_traffic

MAX_ROWS = 50_000  # rows read per /proc/net/tcp table
MAX_PEERS = 16  # peers kept per target (the most connected first)
SCAN_BUDGET_S = 0.3  # the node-wide search for the owners of the far ends
_ESTABLISHED = "01"
# Ray's own processes, which every worker talks to: never a peer worth naming.
_SYSTEM = ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "runtime_env", "ray_client_server",
           "ray::idle", "--worker-type=idle")


def _system(title: str) -> bool:
    low = title.lower()
    return any(mark in low for mark in _SYSTEM)


def socket_inodes(pid: int, max_fds: int = MAX_FDS) -> set[int]:
    """The inodes of `pid`'s sockets, from its /proc/PID/fd links (`socket:[inode]`)."""
    found: set[int] = set()
    for _, link in fd_links(pid, max_fds):
        if link.startswith("socket:[") and link.endswith("]") and link[8:-1].isdigit():
            found.add(int(link[8:-1]))
    return found


def tcp_table(pid: int, max_rows: int = MAX_ROWS) -> dict[int, tuple[str, str]]:
    """{inode: (local, remote)} of the ESTABLISHED TCP sockets in `pid`'s network namespace,
    addresses as the kernel prints them (hex ip:port; the same form on both ends)."""
    table: dict[int, tuple[str, str]] = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}", encoding="ascii", errors="replace") as fh:
                next(fh, None)  # header
                for n, line in enumerate(fh):
                    if n >= max_rows:
                        break
                    cols = line.split()
                    if len(cols) > 9 and cols[3] == _ESTABLISHED and cols[9].isdigit() and cols[9] != "0":
                        table[int(cols[9])] = (cols[1], cols[2])
        except OSError:
            continue
    return table


def _owners(wanted: set[int], skip: set[int], budget_s: float) -> dict[int, int]:
    """{inode: pid} for the sockets `wanted`, searching every process's fd links once, within
    `budget_s` (what is not found by then stays unknown)."""
    found: dict[int, int] = {}
    end = time.monotonic() + budget_s
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if len(found) == len(wanted) or time.monotonic() > end:
            break
        if pid in skip or _system(_title(pid)):
            continue  # Ray's daemons hold thousands of sockets: never the peer looked for
        for inode in socket_inodes(pid) & wanted:
            found[inode] = pid
    return found


def _title(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read(300).replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def socket_peers(pids: list[int], budget_s: float = SCAN_BUDGET_S) -> dict[int, list[dict[str, Any]]]:
    """{target pid: [{"pid", "title", "connections"}]}: the processes on this node at the far end
    of each target's ESTABLISHED TCP connections (not the target itself, not Ray's own daemons,
    not idle pool workers), most connections first."""
    if not pids:
        return {}
    table = tcp_table(pids[0])
    by_ends = {ends: inode for inode, ends in table.items()}
    mine: dict[int, list[int]] = {}  # target -> far-end inodes
    for pid in pids:
        ends = [table[inode] for inode in socket_inodes(pid) if inode in table]
        mine[pid] = [by_ends[(remote, local)] for local, remote in ends if (remote, local) in by_ends]
    owner = _owners({i for far in mine.values() for i in far}, set(), budget_s)
    out: dict[int, list[dict[str, Any]]] = {}
    titles: dict[int, str] = {}
    for pid, far in mine.items():
        counts: dict[int, int] = {}
        for inode in far:
            peer = owner.get(inode)
            if peer is not None and peer != pid:
                counts[peer] = counts.get(peer, 0) + 1
        peers = []
        for peer, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            title = titles.setdefault(peer, _title(peer))
            if _system(title):
                continue
            peers.append({"pid": peer, "title": title[:160], "connections": n})
        if peers:
            out[pid] = peers[:MAX_PEERS]
    return out


# ------------------------------------------------------------------ ports a connect loop dials
_LISTEN = "0A"
MAX_TARGETS = 16  # connect targets kept per process


def listening_ports(pid: int, max_rows: int = MAX_ROWS) -> set[int] | None:
    """The TCP ports with a listening socket (state LISTEN, any local address) in `pid`'s network
    namespace, from /proc/PID/net/tcp and tcp6; None when neither table can be read."""
    ports: set[int] = set()
    read = False
    for name in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{name}", encoding="ascii", errors="replace") as fh:
                read = True
                next(fh, None)  # header
                for n, line in enumerate(fh):
                    if n >= max_rows:
                        break
                    cols = line.split()
                    if len(cols) > 3 and cols[3] == _LISTEN and ":" in cols[1]:
                        try:
                            ports.add(int(cols[1].rsplit(":", 1)[1], 16))
                        except ValueError:
                            continue
        except OSError:
            continue
    return ports if read else None


def connect_targets(processes: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """{pid: [{"tid", "port", "listening", "loopback"?}]}: for each connect frame of the samples
    (stacks/v1 process dicts) whose facts hold an int `port`, whether a socket of the process's own
    network namespace listens on that port now (after the last sample), and whether the frame's
    host is a loopback address (its `loopback(host)` fact, when read). Read-only and bounded."""
    wanted: dict[int, dict[tuple[int, int], bool | None]] = {}
    for proc in processes:
        pid = proc.get("pid")
        if not isinstance(pid, int):
            continue
        for thread in proc.get("threads") or []:
            tid = thread.get("os_thread_id")
            if not isinstance(tid, int):
                continue
            for frame in thread.get("frames") or []:
                facts = frame.get("facts")
                if not isinstance(facts, dict) or not CONNECT_FRAME.search(str(frame.get("function") or "")):
                    continue
                port = facts.get("port")
                if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
                    continue
                targets = wanted.setdefault(pid, {})
                if len(targets) >= MAX_TARGETS and (tid, port) not in targets:
                    continue
                loopback = facts.get(LOOPBACK_FACT)
                if isinstance(loopback, bool):
                    targets[(tid, port)] = loopback
                else:
                    targets.setdefault((tid, port), None)
    out: dict[int, list[dict[str, Any]]] = {}
    for pid, targets in wanted.items():
        ports = listening_ports(pid)
        if ports is None:
            continue
        out[pid] = [{"tid": tid, "port": port, "listening": port in ports,
                     **({"loopback": loopback} if loopback is not None else {})}
                    for (tid, port), loopback in sorted(targets.items())]
    return out


# ------------------------------------------------------------------ the socket an accept waits on
_ACCEPTCON = 0x10000  # /proc/net/unix Flags: a listening socket (__SO_ACCEPTCON)
# An accept frame as py-spy shows it: socket.accept/_accept, multiprocessing's Listener.accept,
# or a job line that calls `.accept()` (the C method shows no frame of its own).
ACCEPT_FRAME = re.compile(r"(^|\.)_?accept$")
_ACCEPT_CALL = re.compile(r"\.accept\(")


def listening_inodes(pid: int, max_rows: int = MAX_ROWS) -> dict[int, dict[str, Any]]:
    """{inode: {"port": N} or {"path": P}} of the listening TCP (state LISTEN) and unix
    (__SO_ACCEPTCON) sockets in `pid`'s network namespace."""
    found: dict[int, dict[str, Any]] = {}
    for name in ("tcp", "tcp6"):
        for cols in _net_rows(pid, name, max_rows):
            if len(cols) > 9 and cols[3] == _LISTEN and cols[9].isdigit() and ":" in cols[1]:
                try:
                    found[int(cols[9])] = {"port": int(cols[1].rsplit(":", 1)[1], 16)}
                except ValueError:
                    continue
    for cols in _net_rows(pid, "unix", max_rows):
        try:
            listening = len(cols) > 6 and int(cols[3], 16) & _ACCEPTCON and cols[6].isdigit()
        except ValueError:
            continue
        if listening:
            found[int(cols[6])] = {"path": cols[7][:200]} if len(cols) > 7 else {}
    return found


def _net_rows(pid: int, table: str, max_rows: int) -> Iterator[list[str]]:
    """The columns of the first `max_rows` rows of /proc/PID/net/`table` (its header skipped);
    nothing when it cannot be read."""
    try:
        with open(f"/proc/{pid}/net/{table}", encoding="utf-8", errors="replace") as fh:
            next(fh, None)
            for n, line in enumerate(fh):
                if n >= max_rows:
                    return
                yield line.split()
    except OSError:
        return


def _accepting(thread: dict[str, Any]) -> bool:
    frames = [f for f in thread.get("frames") or [] if isinstance(f, dict)][:6]
    return any(ACCEPT_FRAME.search(str(f.get("function") or "")) or _ACCEPT_CALL.search(str(f.get("code") or ""))
               for f in frames)


def accept_sockets(processes: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """{pid: {tid: {"fd", "port"|"path"}}}: for each thread of the samples in an accept frame and
    asleep in a system call whose first argument is a descriptor of a listening socket (accept,
    accept4), that socket: the port (TCP) or path (unix) it waits for a connection on. Read after
    the last sample; a thread that has left the call, or a descriptor that is no listening
    socket, is left out. Read-only and bounded."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    tables: dict[int, dict[int, dict[str, Any]]] = {}
    for proc in processes:
        pid = proc.get("pid")
        if not isinstance(pid, int):
            continue
        for thread in proc.get("threads") or []:
            tid = thread.get("os_thread_id")
            if not isinstance(tid, int) or not _accepting(thread) or str(tid) in out.get(pid, {}):
                continue
            call = thread_syscall(pid, tid)
            if call is None:
                continue
            try:
                fd = int(call[1], 16)
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except (ValueError, OSError):
                continue
            if not (link.startswith("socket:[") and link[8:-1].isdigit()):
                continue
            if pid not in tables:
                tables[pid] = listening_inodes(pid)
            sock = tables[pid].get(int(link[8:-1]))
            if sock is not None:
                out.setdefault(pid, {})[str(tid)] = {"fd": fd, **sock}
            if len(out.get(pid, {})) >= MAX_TARGETS:
                break
    return out


# ------------------------------------------------------------------ the connection a read waits on
def _reading(thread: dict[str, Any]) -> bool:
    frames = [f for f in thread.get("frames") or [] if isinstance(f, dict)][:6]
    return any(SOCKET_READ_FRAME.search(f"{f.get('function') or ''} {f.get('code') or ''}") for f in frames)


# poll and ppoll, whose first argument points to the pollfd array: a socket with a timeout
# (`sock.settimeout`, `requests.get(..., timeout=)`) is waited on in poll() before each recv.
_POLLS = {"x86_64": {7, 271}, "aarch64": {73}}
# restart_syscall: a poll with a timeout interrupted by a stop (py-spy's own dump pauses the
# process) is resumed through it, its registers - the pollfd pointer and count - left as they were.
_RESTART = {"x86_64": 219, "aarch64": 128}
MAX_POLL_FDS = 16


def waited_fds(pid: int, call: list[str]) -> list[int]:
    """The descriptors a thread asleep in system call `call` ([nr, arg0..]) waits on: the first
    argument of a read or recv; for poll/ppoll, the descriptors of its pollfd array (read from the
    process's memory, 8 bytes each, at most MAX_POLL_FDS); none when they cannot be read."""
    try:
        nr, arg0, arg1 = int(call[0]), int(call[1], 16), int(call[2], 16)
    except (ValueError, IndexError):
        return []
    machine = platform.machine()
    polled = nr in _POLLS.get(machine, set()) or (nr == _RESTART.get(machine) and arg0 >= 1 << 20)
    if not polled:
        return [arg0] if arg0 < 1 << 20 else []
    count = min(arg1, MAX_POLL_FDS)
    if count <= 0 or arg0 <= 0:
        return []
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(arg0)
            raw = mem.read(8 * count)
    except (OSError, ValueError, OverflowError):
        return []
    return [fd for (fd, _events, _revents) in struct.iter_unpack("=ihh", raw[: len(raw) // 8 * 8]) if fd >= 0]


def reading_sockets(processes: list[dict[str, Any]]) -> dict[int, dict[str, dict[str, Any]]]:
    """{pid: {tid: {"fd", "state", "bytes_received", "bytes_sent", "last_recv_ms", "last_send_ms",
    "rqueue", "wqueue"}}}: for each thread of the samples in a read frame and asleep in a system
    call on a TCP socket (recv, recvfrom, read: its first argument; poll/ppoll, as a socket with a
    timeout waits: its pollfd array), that connection's traffic as the kernel counts it. Read after
    the last sample; a thread that left the call, another network namespace, or a socket the kernel
    dump does not return is left out. Read-only and bounded."""
    calls: dict[int, dict[str, tuple[int, int]]] = {}  # pid -> tid -> (fd, inode)
    for proc in processes:
        pid = proc.get("pid")
        if not isinstance(pid, int):
            continue
        for thread in proc.get("threads") or []:
            tid = thread.get("os_thread_id")
            if not isinstance(tid, int) or not _reading(thread) or str(tid) in calls.get(pid, {}):
                continue
            if len(calls.get(pid, {})) >= MAX_TARGETS:
                break
            call = thread_syscall(pid, tid)
            if call is None:
                continue
            for fd in waited_fds(pid, call):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:[") and link[8:-1].isdigit() and same_netns(pid):
                    calls.setdefault(pid, {})[str(tid)] = (fd, int(link[8:-1]))
                    break
    traffic = tcp_traffic({inode for found in calls.values() for _fd, inode in found.values()})
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for pid, found in calls.items():
        for tid, (fd, inode) in found.items():
            if inode in traffic:
                out.setdefault(pid, {})[tid] = {"fd": fd, **traffic[inode]}
    return out


# ------------------------------------------------------------------ the connections an event loop waits on
_EPOLL_WAITS = {"x86_64": {232, 281, 441}, "aarch64": {22, 441}}  # epoll_wait, epoll_pwait, epoll_pwait2
MAX_LOOP_FDS = 64  # descriptors read per epoll instance


def epoll_fds(pid: int, epfd: int, max_fds: int = MAX_LOOP_FDS) -> list[int]:
    """The descriptors registered in `pid`'s epoll instance `epfd` (the `tfd:` lines of
    /proc/PID/fdinfo/EPFD); empty when it cannot be read or is no epoll."""
    out: list[int] = []
    try:
        with open(f"/proc/{pid}/fdinfo/{epfd}", encoding="ascii", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) > 1 and parts[0] == "tfd:" and parts[1].isdigit():
                    out.append(int(parts[1]))
                    if len(out) >= max_fds:
                        break
    except OSError:
        return []
    return out


def loop_sockets(loop_calls: dict[int, dict[str, list[str]]], machine: str) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """{pid: {tid: [{"fd", "state", "bytes_received", "last_recv_ms", ...}]}}: for each event-loop
    thread asleep in epoll_wait (`loop_calls`: {pid: {tid: [nr, arg0..]}}, add_loop_syscalls), the
    TCP connections registered in that epoll instance and their traffic (probe/tcp_info.py): what an
    idle loop's awaiting coroutines may be reading, which py-spy cannot show. Read-only, bounded."""
    waits = _EPOLL_WAITS.get(machine, set())
    found: dict[int, dict[str, list[tuple[int, int]]]] = {}
    for pid, calls in loop_calls.items():
        if not same_netns(pid):
            continue
        for tid, call in calls.items():
            try:
                nr, epfd = int(call[0]), int(call[1], 16)
            except (ValueError, IndexError):
                continue
            if nr not in waits:
                continue
            conns = []
            for fd in epoll_fds(pid, epfd):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:[") and link[8:-1].isdigit():
                    conns.append((fd, int(link[8:-1])))
            if conns:
                found.setdefault(pid, {})[tid] = conns
    traffic = tcp_traffic({inode for per_tid in found.values() for pairs in per_tid.values() for _fd, inode in pairs})
    out: dict[int, dict[str, list[dict[str, Any]]]] = {}
    for pid, registered in found.items():
        for tid, pairs in registered.items():
            tcp = [{"fd": fd, **traffic[inode]} for fd, inode in pairs if inode in traffic]
            if tcp:
                out.setdefault(pid, {})[tid] = tcp
    return out


# ------------------------------------------------------------------ a child's connections
MAX_CHILD_SOCKETS = 16  # sockets read per child process


def process_sockets(pids: dict[int, int]) -> dict[int, list[dict[str, Any]]]:
    """{pid: [{"fd", "state", "bytes_received", "last_recv_ms", ...}]}: the TCP connections each
    process (`pids`: child -> its parent; a child with no Python stack - curl, a native downloader -
    whose waits py-spy cannot show) opened itself, and their traffic (probe/tcp_info.py). A socket
    its parent holds too was inherited over fork (a Ray worker's gRPC channels, which its forked
    children keep open and never read): its bytes are the parent's, and it is left out. Read-only,
    bounded."""
    found: dict[int, list[tuple[int, int]]] = {}
    for pid, parent in pids.items():
        if not same_netns(pid):
            continue
        inherited = socket_inodes(parent)
        for fd, link in fd_links(pid, MAX_FDS):
            if link.startswith("socket:[") and link.endswith("]") and link[8:-1].isdigit() \
                    and int(link[8:-1]) not in inherited:
                found.setdefault(pid, []).append((int(fd), int(link[8:-1])))
                if len(found[pid]) >= MAX_CHILD_SOCKETS:
                    break
    traffic = tcp_traffic({inode for pairs in found.values() for _fd, inode in pairs})
    out: dict[int, list[dict[str, Any]]] = {}
    for pid, pairs in found.items():
        tcp = [{"fd": fd, **traffic[inode]} for fd, inode in pairs if inode in traffic]
        if tcp:
            out[pid] = tcp
    return out
