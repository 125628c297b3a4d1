"""Ray Serve's own evidence, read on the node (stdlib only): the node's Serve metrics and the
request logs a process writes.

Serve requests have no task rows and an awaiting coroutine shows no stack; what shows them is the
library's counters — each process exports them to its node's metrics agent, which serves them on
the node's metrics export port (the raylet writes the port to `<session>/metrics_export_port_<node>`)
— and each replica's request log under the session's `logs/serve/` (one line per finished request).
Both are read bounded in time and size; nothing is written or signalled.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
from typing import Any

from debug_hang.libraries import SERVE_LABELS, SERVE_METRICS
from debug_hang.probe.procfd import fd_links

METRICS_TIMEOUT_S = 3.0
MAX_METRICS_BYTES = 16 << 20  # a node's whole export, at most (the rest is not read)
MAX_SAMPLES = 4000  # Serve samples kept per node
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)')
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


def _raylet_arg(raylet_pid: int, name: bytes) -> str | None:
    try:
        with open(f"/proc/{raylet_pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except OSError:
        return None
    prefix = b"--" + name + b"="
    return next((a[len(prefix):].decode("utf-8", "replace") for a in args if a.startswith(prefix)), None)


def metrics_url(node_id: str, raylet_pid: int | None) -> tuple[str | None, str | None]:
    """(URL of the node's metrics endpoint, why not) from the raylet's arguments and the port file."""
    if raylet_pid is None:
        return None, "no raylet of this node here"
    log_dir, ip = _raylet_arg(raylet_pid, b"log_dir"), _raylet_arg(raylet_pid, b"node_ip_address")
    if not log_dir or not ip:
        return None, "the raylet's --log_dir/--node_ip_address not found"
    path = os.path.join(os.path.dirname(log_dir.rstrip("/")), f"metrics_export_port_{node_id}")
    try:
        with open(path, encoding="ascii") as fh:
            port = int(fh.read(16).strip())
    except (OSError, ValueError):
        return None, f"no metrics port file {os.path.basename(path)} (Ray before 2.x, or metrics off)"
    host = f"[{ip}]" if ":" in ip else ip
    return f"http://{host}:{port}/metrics", None


def parse_samples(lines: list[str], wanted: tuple[str, ...] = SERVE_METRICS,
                  keep: tuple[str, ...] = SERVE_LABELS) -> list[dict[str, Any]]:
    """Prometheus text lines -> [{name, labels (the kept ones), value}] of the wanted families."""
    out: list[dict[str, Any]] = []
    for line in lines:
        if not line.startswith(wanted):
            continue
        match = _SAMPLE.match(line)
        if match is None or match.group("name") not in wanted:
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        labels = {m.group("key"): m.group("value")[:200] for m in _LABEL.finditer(match.group("labels") or "")
                  if m.group("key") in keep}
        out.append({"name": match.group("name"), "labels": labels, "value": value})
        if len(out) >= MAX_SAMPLES:
            break
    return out


def read_serve_metrics(node_id: str, raylet_pid: int | None, timeout_s: float = METRICS_TIMEOUT_S) -> dict[str, Any]:
    """{"samples": [...], "read_at", "error"?}: this node's Serve gauges and counters."""
    url, why = metrics_url(node_id, raylet_pid)
    if url is None:
        return {"samples": [], "error": why}
    end = time.monotonic() + timeout_s
    lines: list[str] = []
    read = 0
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # noqa: S310 - the node's own metrics port
            for raw in resp:
                read += len(raw)
                if raw.startswith(b"ray_serve_"):
                    lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                if read >= MAX_METRICS_BYTES or time.monotonic() > end:
                    break
    except (OSError, ValueError) as exc:
        return {"samples": [], "error": f"metrics endpoint not read: {getattr(exc, 'reason', exc)}"}
    return {"samples": parse_samples(lines), "read_at": time.time(), "bytes": read}


def request_logs(pid: int, seen: set[tuple[int, int]]) -> list[dict[str, Any]]:
    """The Serve request logs a process writes (files it holds open under a `logs/serve/` folder),
    as probe/progress.py describes a log file; `seen` holds the (device, inode) already taken."""
    files: list[dict[str, Any]] = []
    for fd, path in fd_links(pid):
        if "/logs/serve/" not in path or not path.endswith(".log"):
            continue
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen or not os.path.isfile(path):
            continue
        seen.add((st.st_dev, st.st_ino))
        files.append({"fd": int(fd), "path": path, "name": os.path.basename(path), "size": st.st_size,
                      "mtime": st.st_mtime, "inode": st.st_ino, "dev": st.st_dev, "kind": "serve-requests"})
    return files
