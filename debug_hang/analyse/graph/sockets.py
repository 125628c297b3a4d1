"""Waits that cross a TCP connection on one node: a thread blocked reading a socket waits for the
process at the other end, when the probe found exactly one such process (`socket_peers`, read
from /proc on the node) that no Ray call links to the reader. Ray's own connections (a caller's
gRPC channel to its callee, an actor's to the driver that owns it) carry no such wait."""

from __future__ import annotations

import re
from typing import Any

from debug_hang.analyse.graph.builder import Builder, follows
from debug_hang.analyse.graph.model import GNode
from debug_hang.analyse.graph.threads import deciding_thread
from debug_hang.facts import SOCKET_READ_FRAME
from debug_hang.model import ProcessRef, Thread
from debug_hang.snapshot import DRIVER_TASK_PREFIX
from debug_hang.untrusted import strip_controls

# A socket *read* (a reply awaited from the other end); accept/connect/sendall and file locks
# wait for no one process at the end of an established connection.
_READ = SOCKET_READ_FRAME
# A wait for a connection on a listening socket: socket.accept (or its C `_accept`), a job line
# calling `.accept()` (multiprocessing's Listener.accept, a raw socket's: the C call shows no frame).
_ACCEPT_FN = re.compile(r"(^|\.)_?accept$")
_ACCEPT_CALL = re.compile(r"\.accept\(\s*\)")


def accept_wait(node: GNode) -> bool:
    """True when the node's deciding wait is an accept on a listening socket: there is no peer
    yet, so nothing to follow — any process that knows the address may connect."""
    if node.pattern != "io-wait":
        return False
    frames = [f for f in (node.frame, node.user_frame) if f is not None]
    return any(_ACCEPT_FN.search(f.function) and re.search(r"(^|/)(socket|multiprocessing/connection)\.py$", f.file)
               for f in frames) or any(_ACCEPT_CALL.search(f.code or "") for f in frames)


def listening_port(node: GNode) -> str:
    """The address an accept waits on, as the probe read it from the call's descriptor
    (`accepting`: "port 46769", "unix socket /tmp/x.sock"); "" when not read."""
    return node.listening


def ray_linked(b: Builder, keys: list[str]) -> set[ProcessRef]:
    """The processes linked to those of `keys` by a Ray call in any state (Ray keeps a caller's
    gRPC channel to its callee open after the call): the callers of the calls they ran (the
    driver, for the calls and actors it made), and the processes that ran calls they made."""
    procs = {b.g.nodes[k].ref for k in keys}
    ran = [t for t in b.inp.tasks if t.worker is not None and t.worker in procs]
    ran += [t for k in keys for t in b.running.get(k, [])]
    mine = {t.task_id for t in ran}
    parents = {t.parent_task_id for t in ran if t.parent_task_id}
    called = {t.actor_id for t in b.inp.tasks if t.parent_task_id in mine and t.actor_id}
    refs = {t.worker for t in b.inp.tasks if t.worker is not None and (t.task_id in parents or t.parent_task_id in mine)}
    refs |= {ProcessRef(a.node_id, a.pid) for a in b.inp.actors if a.pid and a.actor_id in called}
    if any(p.startswith(DRIVER_TASK_PREFIX) for p in parents):
        refs |= {n.ref for n in b.g.nodes.values() if n.kind == "driver"}
    return refs


def socket_peers_of(b: Builder, key: str) -> list[dict[str, Any]]:
    """The probe's TCP peers of one node's process (pid, title, connections), well-formed only."""
    peers = b.inp.info.get(b.g.nodes[key].ref, {}).get("socket_peers") or []
    return [p for p in peers if isinstance(p, dict) and isinstance(p.get("pid"), int)]


@follows("socket-peer")
def follow_socket_peer(b: Builder, key: str) -> None:
    """A socket read waits for the one process on its node at the other end of its connections
    that no Ray call explains: a process of the job (its own stack judges it) is followed; another
    process is named in the evidence only (its stack was not read)."""
    g = b.g
    node = g.nodes[key]
    if accept_wait(node):
        _note_accept(b, node)
        return
    if not any(f is not None and _READ.search(f"{f.function} {f.code or ''}") for f in (node.frame, node.user_frame)):
        return
    note_traffic(b, key)
    linked = ray_linked(b, [key])
    peers = [p for p in socket_peers_of(b, key)
             if p["pid"] != node.pid and ProcessRef(node.node_id, p["pid"]) not in linked]
    if len(peers) != 1:
        node.peers = [p["pid"] for p in peers]
        if peers:
            node.evidence.append("TCP peers on its node that no Ray call explains: " + ", ".join(
                f"pid {p['pid']} `{str(p.get('title') or '')[:60]}`" for p in peers[:4]) + " (which one it reads is not known)")
        return
    peer = peers[0]
    dst = b.by_pid.get(ProcessRef(node.node_id, peer["pid"]))
    title = str(peer.get("title") or "")[:100]
    if dst is None or dst == key:
        node.evidence.append(f"the other end of its TCP connection on this node is pid {peer['pid']} `{title}`, "
                             "not a process of the job (its stack was not read)")
        return
    g.add_edge(key, dst, "io-wait", f"reads a TCP connection whose other end is {g.nodes[dst].name} (pid {peer['pid']}), "
               "its only peer on the node that no Ray call links to it")


RECENT_RECV_S = 60.0  # data that came this recently on the connection a read waits on: its peer still sends


def note_traffic(b: Builder, key: str) -> None:
    """What the kernel counts on the connection the reading thread waits on (the probe's `reading`,
    tcp_info): bytes received and how long ago the last came (since it connected, when none did).
    Data within RECENT_RECV_S says the peer is alive and sending - a throttled download, a paced
    stream - which /proc/PID/io cannot show (it counts no socket bytes): `GNode.receiving`."""
    node = b.g.nodes[key]
    verdict = b.verdicts.get(key)
    found = b.inp.info.get(node.ref, {}).get("reading")
    if verdict is None or not isinstance(found, dict):
        return
    # The deciding thread's connection; else one another thread of it reads (the node's wait was
    # followed in-process to a thread in a socket read: an Event its download thread will set).
    waiter = deciding_thread(verdict)
    mine = [c for tid, c in found.items() if isinstance(c, dict) and waiter is not None and tid == str(waiter.os_thread_id)]
    conns = mine or [c for c in found.values() if isinstance(c, dict)]
    conn = conns[0] if conns else None
    if conn is None or not all(isinstance(conn.get(k), int) for k in ("fd", "bytes_received", "last_recv_ms")):
        return
    received, ago = int(conn["bytes_received"]), int(conn["last_recv_ms"]) / 1000.0
    sent = conn.get("bytes_sent")
    sent_ago = conn.get("last_send_ms")
    tail = (f"; {_amount(int(sent))} sent, the last {int(sent_ago) / 1000.0:.1f}s ago"
            if isinstance(sent, int) and isinstance(sent_ago, int) and sent > 0 else "")
    if received == 0:
        node.evidence.append(f"the TCP connection it reads (fd {conn['fd']}, kernel tcp_info) has received no data "
                             f"since it was made {ago:.1f}s ago{tail}")
        return
    node.evidence.append(f"the TCP connection it reads (fd {conn['fd']}, kernel tcp_info) has received "
                         f"{_amount(received)}, the last data {ago:.1f}s ago{tail}")
    if ago < RECENT_RECV_S:
        node.receiving = (f"reads a TCP connection (fd {conn['fd']}) that received data {ago:.1f}s ago "
                          f"({_amount(received)} so far)")


def loop_traffic(b: Builder, key: str, loops: list[Thread]) -> tuple[str, str]:
    """(receiving, seen) for an async actor whose event loop is idle: the TCP connections registered
    in its loop's epoll (the probe's `loop_sockets`, tcp_info). `receiving` names one that received
    data within RECENT_RECV_S ("" when none did): a coroutine reads it, and its peer still sends.
    `seen` says what was read of them, for the evidence ("" when none is registered)."""
    found = b.inp.info.get(b.g.nodes[key].ref, {}).get("loop_sockets")
    if not isinstance(found, dict):
        return "", ""
    tids = {str(t.os_thread_id) for t in loops}
    conns = [c for tid, per in found.items() if tid in tids and isinstance(per, list) for c in per
             if isinstance(c, dict) and all(isinstance(c.get(k), int) for k in ("fd", "bytes_received", "last_recv_ms"))]
    if not conns:
        return "", ""
    fresh = sorted((c for c in conns if c["bytes_received"] > 0), key=lambda c: c["last_recv_ms"])
    seen = (f"its event loop waits on {len(conns)} TCP connection(s) (its epoll, kernel tcp_info): "
            + ", ".join(f"fd {c['fd']} " + (f"{_amount(c['bytes_received'])} received, the last {c['last_recv_ms'] / 1000:.1f}s ago"
                                             if c["bytes_received"] else
                                             f"nothing received since it was made {c['last_recv_ms'] / 1000:.1f}s ago")
                        for c in conns[:3]))
    if fresh and fresh[0]["last_recv_ms"] / 1000.0 < RECENT_RECV_S:
        c = fresh[0]
        return (f"awaits in an event loop whose TCP connection (fd {c['fd']}) received data "
                f"{c['last_recv_ms'] / 1000:.1f}s ago ({_amount(c['bytes_received'])} so far)"), seen
    return "", seen


def child_traffic(node: GNode, info: dict[str, Any]) -> None:
    """A child process with no job frame of its own and its TCP connections (the probe's
    `tcp_conns`, tcp_info, those it opened itself): one that received
    data within RECENT_RECV_S says the child still downloads - a native curl or wget whose wait
    py-spy cannot show (`GNode.receiving`); a silent one's age goes into the evidence."""
    if node.user_frame is not None:
        return  # its own Python wait is read (a fork-copied lock, a queue): that decides, not its sockets
    conns = [c for c in info.get("tcp_conns") or [] if isinstance(c, dict)
             and all(isinstance(c.get(k), int) for k in ("fd", "bytes_received", "last_recv_ms"))]
    if not conns:
        return
    fresh = sorted((c for c in conns if c["bytes_received"] > 0), key=lambda c: c["last_recv_ms"])
    node.evidence.append(f"its {len(conns)} TCP connection(s) (kernel tcp_info): " + ", ".join(
        f"fd {c['fd']} " + (f"{_amount(c['bytes_received'])} received, the last {c['last_recv_ms'] / 1000:.1f}s ago"
                            if c["bytes_received"] else
                            f"nothing received since it was made {c['last_recv_ms'] / 1000:.1f}s ago")
        for c in conns[:3]))
    if fresh and fresh[0]["last_recv_ms"] / 1000.0 < RECENT_RECV_S:
        c = fresh[0]
        node.receiving = (f"has a TCP connection (fd {c['fd']}) that received data {c['last_recv_ms'] / 1000:.1f}s ago "
                          f"({_amount(c['bytes_received'])} so far): it is still receiving")


def _amount(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _note_accept(b: Builder, node: GNode) -> None:
    """An accept has no peer to follow: what it listens on (the probe's `accepting`, read from
    the call's descriptor), and that any process may be the client (the verdict weighs who could)."""
    found = b.inp.info.get(node.ref, {}).get("accepting") or {}
    socks = [s for s in found.values() if isinstance(s, dict)] if isinstance(found, dict) else []
    ports = sorted({f"port {s['port']}" for s in socks if isinstance(s.get("port"), int)}
                   | {f"unix socket {strip_controls(str(s['path']), newlines=False)[:120]}" for s in socks if s.get("path")})
    node.listening = ", ".join(ports[:2])
    on = f" on {node.listening}" if node.listening else ""
    node.evidence.append(f"waits for a connection{on} (an accept on a listening socket, /proc): no peer yet to "
                         "follow — any live process that knows the address, of the job or outside it, may connect")
