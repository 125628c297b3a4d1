"""Cheap per-process progress readings, taken on the process's own node (stdlib only).

`read_point(pid)` is taken before the first stack sample and after the last; `window(before,
after)` turns the two into what moved in between: bytes read and written (/proc/PID/io), context
switches of the main thread (/proc/PID/status), and the growth of the log files its stdout and
stderr point to (a Ray worker's .out/.err, a submitted driver's job log) and of a Serve replica's
request log (a file it holds open under the session's logs/serve/), with the new lines and
a few lines from before the window to compare them with. Nothing here stops or signals the
process: these are reads of /proc and of log files. What the readings mean is decided elsewhere
(analyse/progress.py, references/verdict_rules.yaml).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from debug_hang.probe.libraries import request_logs
from debug_hang.redact import redact

IO_FIELDS = ("rchar", "wchar", "read_bytes", "write_bytes", "syscr", "syscw")
CTXT_FIELDS = ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
LOG_FDS = (1, 2)  # stdout, stderr: where Ray points a worker's .out/.err and a driver's job log
TAIL_BYTES = 4096  # read from before the window: the last lines to compare new ones with
MAX_NEW_BYTES = 1 << 20  # read of the window's new log bytes, at most (the rest is counted)
TAIL_LINES = 8
NEW_LINES = 20
LINE_CHARS = 240


def _read_keyed(path: str, fields: tuple[str, ...]) -> dict[str, int]:
    found: dict[str, int] = {}
    with open(path, encoding="ascii", errors="replace") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in fields:
                try:
                    found[key] = int(value.split()[0])
                except (IndexError, ValueError):
                    continue
    return found


def _log_files(pid: int) -> list[dict[str, Any]]:
    """The regular files behind the process's stdout and stderr (deduplicated)."""
    files: list[dict[str, Any]] = []
    seen: set[tuple[int, int]] = set()
    for fd in LOG_FDS:
        try:
            path = os.readlink(f"/proc/{pid}/fd/{fd}")
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if not os.path.isfile(f"/proc/{pid}/fd/{fd}") or (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        files.append({"fd": fd, "path": path, "name": os.path.basename(path), "size": st.st_size,
                      "mtime": st.st_mtime, "inode": st.st_ino})
    return files + request_logs(pid, seen)  # a Serve replica's request log: one line per finished request


def read_point(pid: int) -> dict[str, Any]:
    """One reading of a process: io counters, context switches, log files (sizes), and when."""
    point: dict[str, Any] = {"wall": time.time(), "errors": []}
    try:
        point["io"] = _read_keyed(f"/proc/{pid}/io", IO_FIELDS)
    except OSError as exc:
        point["errors"].append(f"/proc/{pid}/io: {exc.strerror or exc}")
    try:
        point["ctxt"] = _read_keyed(f"/proc/{pid}/status", CTXT_FIELDS)
    except OSError as exc:
        point["errors"].append(f"/proc/{pid}/status: {exc.strerror or exc}")
    point["logs"] = _log_files(pid)
    return point


def _lines(data: bytes, clean: Callable[[str], str] = redact) -> list[str]:
    """Non-empty lines, each redacted before it is cut (a cut token is no longer recognisable)."""
    return [clean(ln)[:LINE_CHARS] for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]


def _read_range(path: str, start: int, end: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(max(0, start))
        return fh.read(max(0, end - start))


def _log_window(before: dict[str, Any], after: dict[str, Any], clean: Callable[[str], str] = redact) -> dict[str, Any]:
    """What a log file gained between two readings: bytes, lines, the new lines, the tail before."""
    entry: dict[str, Any] = {"fd": after["fd"], "name": after["name"], "bytes": 0, "lines": 0,
                             "new": [], "tail": [], "age_s": None}
    entry["age_s"] = round(max(0.0, time.time() - float(after["mtime"])), 2)
    start, end = int(before["size"]), int(after["size"])
    try:
        if start > 0:
            head = _read_range(after["path"], max(0, start - TAIL_BYTES), start)
            entry["tail"] = _lines(head.split(b"\n", 1)[-1] if start > TAIL_BYTES else head, clean)[-TAIL_LINES:]
        if end < start:
            entry["rotated"] = True  # truncated or replaced: growth unknown
            return entry
        entry["bytes"] = end - start
        if end > start:
            data = _read_range(after["path"], start, min(end, start + MAX_NEW_BYTES))
            lines = _lines(data, clean)
            entry["lines"] = len(lines) if end - start <= MAX_NEW_BYTES else None
            entry["new"] = lines[:NEW_LINES // 2] + lines[NEW_LINES // 2:][-(NEW_LINES // 2):]
    except OSError as exc:
        entry["error"] = f"{after['name']}: {exc.strerror or exc}"
    return entry


def window(before: dict[str, Any], after: dict[str, Any], clean: Callable[[str], str] = redact) -> dict[str, Any]:
    """What moved between two readings of one process (JSON-able); log lines pass `clean` (the
    node's redactor) before anything is cut."""
    out: dict[str, Any] = {"window_s": round(float(after["wall"]) - float(before["wall"]), 3),
                           "errors": list(dict.fromkeys(before.get("errors", []) + after.get("errors", [])))}
    if "io" in before and "io" in after:
        out["io"] = {k: after["io"][k] - before["io"][k] for k in IO_FIELDS if k in before["io"] and k in after["io"]}
    if "ctxt" in before and "ctxt" in after:
        out["ctxt"] = {k: after["ctxt"][k] - before["ctxt"][k] for k in CTXT_FIELDS
                       if k in before["ctxt"] and k in after["ctxt"]}
    was = {(f["inode"], f["fd"]): f for f in before.get("logs", [])}
    out["logs"] = [_log_window(was.get((f["inode"], f["fd"]), {**f, "size": f["size"]}), f, clean)
                   for f in after.get("logs", [])]
    return out
