"""What the kernel knows of a TCP connection's traffic: bytes received and sent, and how long ago
data last came in and went out (node side, stdlib only).

/proc/PID/io counts no socket bytes, and /proc/net/tcp shows queues, not history: a thread blocked
in `sock.recv` looks the same whether its peer sends a chunk every five seconds or never will. The
kernel keeps per connection `tcp_info` (what `ss -tin` prints: `bytes_received`, `lastrcv`), which
a sock_diag netlink dump returns for every TCP socket of the network namespace; the dump is
matched by socket inode. Read-only, bounded (messages read, a time budget), and only in the
probe's own network namespace (a target in another one is left out).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
INET_DIAG_INFO = 2
_STATES = (1 << 1) | (1 << 8)  # ESTABLISHED, CLOSE_WAIT (the peer closed; the reader has not seen EOF yet)
_NOCOOKIE = 0xFFFFFFFF
# Formats, not struct.Struct objects: this module is shipped to the nodes by value (node_probe.SHIPPED),
# and a Struct does not pickle.
_HEADER = "=IHHII"  # nlmsghdr: len, type, flags, seq, pid
_REQUEST = "=BBBBI48s"  # inet_diag_req_v2: family, protocol, ext, pad, states, id
_MSG = "=BBBB2H16s16sI2IIIIII"  # inet_diag_msg (72 bytes): ... rqueue, wqueue, uid, inode
_RTATTR = "=HH"
MAX_MESSAGES = 50_000  # sockets read per family
BUDGET_S = 0.3  # per family
_STATE_NAMES = {1: "ESTABLISHED", 8: "CLOSE_WAIT"}


def same_netns(pid: int) -> bool:
    """Whether `pid` shares the probe's network namespace (its sockets are in this dump)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def tcp_traffic(inodes: set[int], budget_s: float = BUDGET_S) -> dict[int, dict[str, Any]]:
    """{inode: {"state", "bytes_received", "bytes_sent", "last_recv_ms", "last_send_ms", "rqueue",
    "wqueue"}} of the wanted TCP sockets (IPv4 and IPv6) of this network namespace that are
    ESTABLISHED or CLOSE_WAIT; a socket not found, or a kernel that refuses the dump, is left out.
    `last_recv_ms` is how long ago data last arrived (since the connection was made, when none did)."""
    found: dict[int, dict[str, Any]] = {}
    if not inodes:
        return found
    for family in (socket.AF_INET, socket.AF_INET6):
        if len(found) == len(inodes):
            break
        try:
            found.update(_dump(family, inodes - set(found), budget_s))
        except OSError:
            continue
    return found


def _dump(family: int, wanted: set[int], budget_s: float) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    end = time.monotonic() + budget_s
    request = struct.pack(_REQUEST, family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1), 0, _STATES,
                            b"\0" * 40 + struct.pack("=II", _NOCOOKIE, _NOCOOKIE))
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(budget_s)
        nl.sendto(struct.pack(_HEADER, struct.calcsize(_HEADER) + len(request), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
                  + request, (0, 0))
        seen = 0
        while time.monotonic() < end and seen < MAX_MESSAGES and len(out) < len(wanted):
            data = nl.recv(1 << 16)
            if not data:
                break
            offset = 0
            while offset + struct.calcsize(_HEADER) <= len(data):
                length, kind, _flags, _seq, _pid = struct.unpack_from(_HEADER, data, offset)
                if length < struct.calcsize(_HEADER) or kind in (NLMSG_DONE, NLMSG_ERROR):
                    return out
                seen += 1
                body = data[offset + struct.calcsize(_HEADER): offset + length]
                offset += (length + 3) & ~3
                if kind == SOCK_DIAG_BY_FAMILY and len(body) >= struct.calcsize(_MSG):
                    row = _row(body, wanted)
                    if row is not None:
                        out[row[0]] = row[1]
    return out


def _row(body: bytes, wanted: set[int]) -> tuple[int, dict[str, Any]] | None:
    """(inode, traffic) of one inet_diag_msg when its socket is wanted and carries a tcp_info."""
    fields = struct.unpack_from(_MSG, body)
    state, rqueue, wqueue, inode = fields[1], fields[-4], fields[-3], fields[-1]
    if inode not in wanted:
        return None
    offset = struct.calcsize(_MSG)
    while offset + struct.calcsize(_RTATTR) <= len(body):
        length, kind = struct.unpack_from(_RTATTR, body, offset)
        if length < struct.calcsize(_RTATTR):
            return None
        if kind == INET_DIAG_INFO and length - struct.calcsize(_RTATTR) >= 136:
            info = body[offset + struct.calcsize(_RTATTR): offset + length]
            last_send, last_recv = struct.unpack_from("=I", info, 44)[0], struct.unpack_from("=I", info, 52)[0]
            acked, received = struct.unpack_from("=QQ", info, 120)
            return inode, {"state": _STATE_NAMES.get(state, str(state)), "bytes_received": received,
                           "bytes_sent": max(0, acked - 1),  # bytes_acked counts the SYN
                           "last_recv_ms": last_recv, "last_send_ms": last_send,
                           "rqueue": rqueue, "wqueue": wqueue}
        offset += (length + 3) & ~3
    return None
