"""A process's open descriptors, from /proc/PID/fd: the one walk the node-side readers share
(file locks, pipes, sockets, Serve's request logs). Runs on the node."""

from __future__ import annotations

import os

MAX_FDS = 4096  # descriptors looked at per process: a bound on the walk, not a limit of the job


def fd_links(pid: int, max_fds: int = MAX_FDS) -> list[tuple[str, str]]:
    """[(fd, link target)] of `pid`'s first `max_fds` descriptors (`socket:[123]`, `pipe:[45]`, a
    path). Descriptors closed during the walk are skipped; an unreadable process has none."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")[:max_fds]
    except OSError:
        return []
    links: list[tuple[str, str]] = []
    for fd in fds:
        try:
            links.append((fd, os.readlink(f"/proc/{pid}/fd/{fd}")))
        except OSError:
            continue
    return links
