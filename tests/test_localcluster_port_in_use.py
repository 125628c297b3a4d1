"""A local cluster (tests, demo) never starts on a port another one holds: the start would fail,
and its clean-up would kill that cluster by port and temp dir (a test run beside a CI rehearsal did)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from debug_hang import localcluster
from debug_hang.errors import DebugHangError

pytestmark = pytest.mark.unit


def _free_listener() -> tuple[socket.socket, int]:
    for port in range(7399, 7300, -1):
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sock.listen(1)
        return sock, port
    pytest.skip("no free port in 7300-7399")


def test_a_port_in_use_is_refused_and_nothing_of_the_holder_is_touched() -> None:
    # GIVEN something listening on a cluster port, its temp dir holding a file
    holder, port = _free_listener()
    temp = Path(f"/tmp/ray_dh_{port}")
    temp.mkdir(exist_ok=True)
    marker = temp / "holder.txt"
    marker.write_text("in use")
    try:
        # WHEN a local cluster is started on it
        with pytest.raises(DebugHangError, match=f"port {port} on 127.0.0.1 is in use"):
            localcluster.start(port, num_cpus=1)
        # THEN the holder still listens and its temp dir is intact
        assert marker.read_text() == "in use"
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        holder.close()
        marker.unlink(missing_ok=True)
        temp.rmdir()
