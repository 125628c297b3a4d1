"""The shared /proc/PID/fd walk, on this test process's own descriptors (live /proc)."""

from __future__ import annotations

import os
import socket
import tempfile

import pytest

from debug_hang.probe.procfd import fd_links

pytestmark = pytest.mark.unit


def test_every_kind_of_descriptor_is_listed_with_its_link() -> None:
    # GIVEN this process holding a file, a pipe and a socket open
    read_end, write_end = os.pipe()
    sock = socket.socket()
    with tempfile.NamedTemporaryFile() as fh:
        try:
            links = dict(fd_links(os.getpid()))
            # THEN each is there under its descriptor number, as the kernel names it
            assert links[str(fh.fileno())] == os.path.realpath(fh.name)
            assert links[str(read_end)] == links[str(write_end)] and links[str(read_end)].startswith("pipe:[")
            assert links[str(sock.fileno())].startswith("socket:[")
        finally:
            os.close(read_end)
            os.close(write_end)
            sock.close()


def test_the_walk_is_bounded_and_a_missing_process_has_none() -> None:
    assert len(fd_links(os.getpid(), max_fds=2)) <= 2
    assert fd_links(2**22 + 1) == []  # above pid_max's ceiling: no such process
