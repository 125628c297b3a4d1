"""A socket read whose connection still delivers data is never called hung (probe/tcp_info.py, the
kernel's tcp_info by sock_diag; graph/sockets.py `note_traffic`; verdict `_receiving_decision`), on
real captures (tests/data/captures/README.md):

- `healthy_detached_trickle_download/` (redteam/healthy_detached_trickle_download.py): fetch_shard
  reads `sock.recv(65536)` from a detached server outside the job that sends 4 KB every 5 s; a
  one-second window saw no byte move. Before: hang, io-wait 0.95 (a false hang).
- `detached_registry_never_sends/` (its hung twin): the server accepted and never sends: the
  connection has received nothing since it was made. Hang, io-wait.
- `healthy_async_detached_trickle_download/`, `async_registry_never_sends/`: the same from an async
  actor awaiting `reader.read`: its loop idle in epoll_wait, the TCP connections registered in that
  epoll read by the probe (`loop_sockets`; graph/sockets.py `loop_traffic`). Before: hang,
  async-await-stuck 0.95 on the healthy one.
- `healthy_curl_detached_trickle/`, `curl_registry_never_answers/`: a task waiting on a curl child
  (no Python stack) whose connection the probe reads (`tcp_conns`; graph/sockets.py `child_traffic`).
  Before: hang, child-process-hang 0.93 on the healthy one.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.socket_peers import reading_sockets
from debug_hang.probe.tcp_info import tcp_traffic
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"
TRICKLE = CAPTURES / "healthy_detached_trickle_download"
WEDGED = CAPTURES / "detached_registry_never_sends"
ASYNC_TRICKLE = CAPTURES / "healthy_async_detached_trickle_download"
ASYNC_WEDGED = CAPTURES / "async_registry_never_sends"
TIMEOUT = CAPTURES / "healthy_detached_trickle_timeout"
JOINER = CAPTURES / "healthy_joiner_sets_after_download"
CURL = CAPTURES / "healthy_curl_detached_trickle"
CURL_WEDGED = CAPTURES / "curl_registry_never_answers"


def _answer(folder: Path) -> tuple[str, str, list[str], dict[str, Any]]:
    doc = to_json(reanalyse(folder))
    top = doc["root_causes"][0]
    return doc["verdict"], top["pattern"], [str(c.get("name")) for c in top["culprits"]], doc


def test_a_read_whose_connection_received_data_a_second_ago_is_inconclusive() -> None:
    # GIVEN fetch_shard in `sock.recv`, its connection 28 KiB in, the last data 1.3 s before the reading
    verdict, pattern, culprits, doc = _answer(TRICKLE)
    # THEN its peer still sends: inconclusive, naming the connection's traffic, never hang
    assert (verdict, pattern, culprits) == ("inconclusive", "io-wait", ["fetch_shard"]), doc["summary"]
    assert "received data 1.3s ago (28.0 KiB so far)" in doc["summary"]


def test_a_read_through_a_socket_timeouts_poll_is_read_too() -> None:
    # GIVEN the same download with a 60 s socket timeout: the thread sleeps in poll(), not recv()
    verdict, pattern, culprits, doc = _answer(TIMEOUT)
    # THEN its connection is found from the pollfd array: inconclusive, never hang
    assert (verdict, pattern, culprits) == ("inconclusive", "io-wait", ["fetch_shard"]), doc["summary"]
    assert "that received data 2.1s ago" in doc["summary"]


def test_an_event_whose_setter_waits_on_a_download_thread_reads_that_threads_connection() -> None:
    # GIVEN get_weights in Event.wait, followed in-process to the download thread in urllib's socket
    # read (its coordinator joins it, then sets the event); that thread's connection got data 2.9 s ago
    verdict, pattern, culprits, doc = _answer(JOINER)
    # THEN the connection read by the other thread spares the wait: inconclusive, never hang
    assert (verdict, pattern, culprits) == ("inconclusive", "io-wait", ["ModelStore"]), doc["summary"]
    assert "received data 2.9s ago" in doc["summary"]


def test_a_read_whose_connection_never_received_data_stays_hung() -> None:
    # GIVEN the twin: the server accepted and sends nothing
    verdict, pattern, culprits, doc = _answer(WEDGED)
    # THEN the read is io-wait's hang, its evidence saying that nothing ever came
    assert (verdict, pattern, culprits) == ("hang", "io-wait", ["fetch_shard"]), doc["summary"]
    assert "has received no data since it was made" in str(doc["root_causes"][0])


def test_an_idle_event_loop_whose_connection_receives_data_is_inconclusive() -> None:
    # GIVEN ShardCache.fetch RUNNING, its loop idle in epoll_wait with no timer, its one registered
    # TCP connection 28 KiB in, the last data 1.8 s before the reading
    verdict, pattern, culprits, doc = _answer(ASYNC_TRICKLE)
    # THEN a coroutine reads a connection whose peer still sends: inconclusive, never async-await-stuck's hang
    assert (verdict, pattern, culprits) == ("inconclusive", "io-wait", ["ShardCache"]), doc["summary"]
    assert "received data 1.8s ago (28.0 KiB so far)" in doc["summary"]


def test_an_idle_event_loop_whose_connection_never_received_data_stays_hung() -> None:
    verdict, pattern, culprits, doc = _answer(ASYNC_WEDGED)
    assert (verdict, pattern, culprits) == ("hang", "async-await-stuck", ["ShardCache"]), doc["summary"]
    assert "fd 43 nothing received since it was made" in str(doc["root_causes"][0])


def test_a_native_child_whose_connection_receives_data_is_inconclusive() -> None:
    # GIVEN fetch_shard in subprocess.run on curl, curl's one TCP connection 28 KiB in, the last data 2 s ago
    verdict, pattern, culprits, doc = _answer(CURL)
    # THEN the child still downloads: inconclusive, never child-process-hang's hang
    assert (verdict, pattern) == ("inconclusive", "child-process-hang"), doc["summary"]
    assert culprits[0].startswith("child of fetch_shard: curl -sS -o")
    assert "that received data 2.0s ago" in doc["summary"]


def test_a_native_child_whose_connection_never_received_data_stays_hung() -> None:
    verdict, pattern, _culprits, doc = _answer(CURL_WEDGED)
    assert (verdict, pattern) == ("hang", "child-process-hang"), doc["summary"]
    assert "fd 5 nothing received since it was made" in str(doc["root_causes"][0])


def _loop_last_data(ago_ms: int) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            for conns in (info.get("loop_sockets") or {}).values():
                for conn in conns:
                    conn["last_recv_ms"] = ago_ms
    return edit


def test_a_loop_connection_silent_for_minutes_no_longer_spares_the_await(tmp_path: Path) -> None:
    variant = capture_variant(tmp_path, ASYNC_TRICKLE, stacks=_loop_last_data(300_000))
    verdict, pattern, _culprits, doc = _answer(variant)
    assert (verdict, pattern) == ("hang", "async-await-stuck"), doc["summary"]


def _last_data(ago_ms: int) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        for info in doc["meta"]["info"]:
            for conn in (info.get("reading") or {}).values():
                conn["last_recv_ms"] = ago_ms
    return edit


def test_data_that_stopped_long_ago_no_longer_spares_the_read(tmp_path: Path) -> None:
    # GIVEN the healthy capture with its last data put 5 minutes back (the peer went silent)
    variant = capture_variant(tmp_path, TRICKLE, stacks=_last_data(300_000))
    verdict, pattern, _culprits, doc = _answer(variant)
    # THEN nothing says the peer still sends: io-wait's hang, the old data named in the evidence
    assert (verdict, pattern) == ("hang", "io-wait"), doc["summary"]
    assert "the last data 300.0s ago" in str(doc["root_causes"][0])


def test_tcp_info_reads_a_real_connections_bytes_and_the_age_of_its_last_data() -> None:
    # GIVEN a real loopback connection that received 5000 bytes, then nothing for 0.3 s
    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname())
        server, _ = srv.accept()
        with client, server:
            server.sendall(b"x" * 5000)
            assert len(client.recv(8192)) > 0
            time.sleep(0.3)
            inode = os.fstat(client.fileno()).st_ino
            found = tcp_traffic({inode})
    # THEN the kernel's counters come back for that socket, by inode
    assert set(found) == {inode}
    assert found[inode]["bytes_received"] == 5000 and found[inode]["bytes_sent"] == 0
    assert 250 <= found[inode]["last_recv_ms"] < 5000
    assert found[inode]["state"] == "ESTABLISHED"


def test_the_probe_lists_the_tcp_connections_an_epoll_waits_on() -> None:
    # GIVEN a real epoll instance of this process with a connected TCP socket registered in it
    import platform
    import select

    from debug_hang.probe.socket_peers import epoll_fds, loop_sockets

    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname())
        server, _ = srv.accept()
        ep = select.epoll()
        with client, server, ep:
            ep.register(client.fileno(), select.EPOLLIN)
            server.sendall(b"w" * 10)
            assert epoll_fds(os.getpid(), ep.fileno()) == [client.fileno()]
            nr = {"x86_64": "232", "aarch64": "22"}.get(platform.machine(), "232")
            found = loop_sockets({os.getpid(): {"1": [nr, hex(ep.fileno()), "0x0", "0x1", "0xffffffff"]}},
                                 platform.machine())
            fd = client.fileno()
    # THEN its traffic is read by the socket's inode
    assert [(c["fd"], c["bytes_received"]) for c in found[os.getpid()]["1"]] == [(fd, 10)]


def test_a_poll_on_a_socket_with_a_timeout_is_matched_after_py_spy_paused_it(tmp_path: Path) -> None:
    # GIVEN a real process blocked in recv on a socket with a timeout (poll), dumped by py-spy first
    # (its stop turns the poll into restart_syscall)
    import shutil
    import subprocess
    import sys

    script = tmp_path / "reader.py"
    script.write_text("import os, socket\nsrv = socket.create_server(('127.0.0.1', 0))\n"
                      "c = socket.create_connection(srv.getsockname(), timeout=60)\ns, _ = srv.accept()\n"
                      "s.sendall(b'q' * 7)\nc.recv(7)\nprint(c.fileno(), flush=True)\nc.recv(10)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        fd = int(proc.stdout.readline()) if proc.stdout else -1
        _settle_in_syscall(proc.pid)
        if shutil.which("py-spy"):
            subprocess.run(["py-spy", "dump", "--pid", str(proc.pid)], capture_output=True, timeout=30)
            _settle_in_syscall(proc.pid)
        found = reading_sockets([{"pid": proc.pid, "threads": [{"os_thread_id": proc.pid, "frames": [
            {"function": "<module>", "code": "c.recv(10)"}]}]}])
    finally:
        proc.kill()
        proc.wait(10)
    # THEN the socket it polls is found, and what it received
    conn = found[proc.pid][str(proc.pid)]
    assert conn["fd"] == fd and conn["bytes_received"] == 7


def _settle_in_syscall(pid: int) -> None:
    """Wait (at most 10 s, the machine may be loaded) until the process's main thread sleeps in a call."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not _in_syscall(pid, pid):
        time.sleep(0.05)
    time.sleep(0.1)


def _in_syscall(pid: int, tid: int | None) -> bool:
    from debug_hang.probe.file_locks import thread_syscall

    return tid is not None and thread_syscall(pid, tid) is not None


def test_a_thread_blocked_in_recv_is_matched_to_its_connection() -> None:
    # GIVEN this process's own thread blocked in recv on a real connection (no cluster: /proc of itself)
    import threading

    with socket.create_server(("127.0.0.1", 0)) as srv:
        client = socket.create_connection(srv.getsockname())
        server, _ = srv.accept()
        with client, server:
            fd = client.fileno()
            server.sendall(b"y" * 100)
            reader = threading.Thread(target=lambda: (client.recv(100), client.recv(100)), daemon=True)
            reader.start()
            deadline = time.monotonic() + 5
            tid = reader.native_id
            while time.monotonic() < deadline and not _in_syscall(os.getpid(), tid):
                time.sleep(0.05)
            assert tid is not None
            proc = {"pid": os.getpid(), "threads": [{"os_thread_id": tid, "frames": [
                {"function": "fetch", "code": "data = sock.recv(65536)"}]}]}
            found = reading_sockets([proc])
            server.sendall(b"z")  # release the reader
            reader.join(5)
    # THEN the probe names the fd the thread reads and that connection's traffic
    conn = found[os.getpid()][str(tid)]
    assert conn["fd"] == fd and conn["bytes_received"] == 100


def test_a_childs_sockets_inherited_over_fork_are_not_its_own() -> None:
    # GIVEN this process with a live connection, and a forked child that keeps it and opens one of its own
    from debug_hang.probe.socket_peers import process_sockets

    with socket.create_server(("127.0.0.1", 0)) as srv:
        inherited = socket.create_connection(srv.getsockname())
        peer, _ = srv.accept()
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its own connection, then wait to be killed
            own = socket.create_connection(srv.getsockname())
            os.write(write_end, str(own.fileno()).encode())
            time.sleep(30)
            os._exit(0)
        try:
            own_fd = int(os.read(read_end, 16))
            time.sleep(0.2)
            found = process_sockets({pid: os.getpid()})
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            for fd in (read_end, write_end):
                os.close(fd)
            inherited.close()
            peer.close()
    # THEN only the connection it opened itself is read (the inherited one is the parent's traffic)
    assert [c["fd"] for c in found[pid]] == [own_fd]
