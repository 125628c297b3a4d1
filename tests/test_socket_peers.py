"""probe/socket_peers.py on real processes: the local processes at the far end of a target's TCP
connections, read from /proc (a rank's group members on its node, whoever started them)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from debug_hang.probe.socket_peers import socket_peers

pytestmark = pytest.mark.unit

# A child that connects to the test's listening socket `n` times and then waits to be killed;
# extra argv words change its command line only.
CHILD = ("import socket, sys, time\n"
         "conns = [socket.create_connection(('127.0.0.1', int(sys.argv[1]))) for _ in range(int(sys.argv[2]))]\n"
         "print('up', flush=True)\n"
         "time.sleep(60)\n")


class Peer:
    def __init__(self, server: socket.socket, n: int, *words: str) -> None:
        port = server.getsockname()[1]
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(port), str(n), *words],
                                     stdout=subprocess.PIPE, text=True)
        self.accepted = [server.accept()[0] for _ in range(n)]
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "up"

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def server() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        srv.settimeout(30)
        yield srv


def test_the_process_at_the_other_end_is_named_with_its_connections(server: socket.socket) -> None:
    # GIVEN a child process holding two TCP connections to this process, and one holding one
    two, one = Peer(server, 2), Peer(server, 1)
    try:
        # WHEN this process's peers are read
        peers = socket_peers([os.getpid()])[os.getpid()]
        # THEN both children are named, the most connected first, with their command lines
        mine = [p for p in peers if p["pid"] in (two.proc.pid, one.proc.pid)]
        assert [(p["pid"], p["connections"]) for p in mine] == [(two.proc.pid, 2), (one.proc.pid, 1)]
        assert "socket.create_connection" in mine[0]["title"]
        # AND from the child's side, this process is its peer (never the child itself)
        back = socket_peers([two.proc.pid])[two.proc.pid]
        assert [p["connections"] for p in back if p["pid"] == os.getpid()] == [2]
        assert all(p["pid"] != two.proc.pid for p in back)
    finally:
        two.close()
        one.close()


def test_rays_own_daemons_and_closed_connections_are_no_peers(server: socket.socket) -> None:
    # GIVEN a peer whose command line is a Ray daemon's (raylet talks to every worker)
    daemon = Peer(server, 1, "--raylet-name=x", "raylet")
    try:
        peers = socket_peers([os.getpid()]).get(os.getpid(), [])
        # THEN it is not listed
        assert all(p["pid"] != daemon.proc.pid for p in peers)
    finally:
        daemon.close()
    # AND a peer gone (its connections closed) is no longer listed
    gone = Peer(server, 1)
    pid = gone.proc.pid
    gone.close()
    time.sleep(0.1)
    assert all(p["pid"] != pid for p in socket_peers([os.getpid()]).get(os.getpid(), []))


def test_no_targets_no_scan() -> None:
    assert socket_peers([]) == {}
