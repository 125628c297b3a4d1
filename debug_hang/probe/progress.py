"""Cheap per-process progress readings, taken on the process's own node (stdlib only).

`read_point(pid)` is taken before the first stack sample and after the last; `window(before,
after)` turns the two into what moved in between: bytes read and written (/proc/PID/io), context
switches of the main thread (/proc/PID/status), and the growth of the log files its stdout and
stderr point to (a Ray worker's .out/.err, a submitted driver's job log) and of a Serve replica's
request log (a file it holds open under the session's logs/serve/), with the new lines and a few
lines from before the window to compare them with.

Only a log is read. Which of a process's stdout/stderr files is one, the caller says (`is_log`;
the node probe: a target's own, a child's when it shares a target's or lies under the session's
log folder): a child's `gzip -c big.csv > big.csv.gz` makes its stdout a data file, whose growth
is counted in bytes (`outputs`) and never read. In a log, only text is counted and quoted
(probe/logtext.py): bytes that are not text are counted, not read as lines. Nothing here stops
or signals the process: these are reads of /proc and of log files. What the readings mean is
decided elsewhere (analyse/progress.py, references/verdict_rules.yaml).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from debug_hang.probe.libraries import request_logs
from debug_hang.probe.logtext import repeated_exceptions, text_lines
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


def std_files(pid: int) -> list[dict[str, Any]]:
    """The regular files behind the process's stdout and stderr (deduplicated), not yet read."""
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
                      "mtime": st.st_mtime, "inode": st.st_ino, "dev": st.st_dev})
    return files


def read_point(pid: int, is_log: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
    """One reading of a process: io counters, context switches, its stdout/stderr files (sizes),
    and when. Files `is_log` refuses (default: none) are `outputs`, whose sizes only are read."""
    point: dict[str, Any] = {"wall": time.time(), "errors": []}
    try:
        point["io"] = _read_keyed(f"/proc/{pid}/io", IO_FIELDS)
    except OSError as exc:
        point["errors"].append(f"/proc/{pid}/io: {exc.strerror or exc}")
    try:
        point["ctxt"] = _read_keyed(f"/proc/{pid}/status", CTXT_FIELDS)
    except OSError as exc:
        point["errors"].append(f"/proc/{pid}/status: {exc.strerror or exc}")
    files = std_files(pid)
    point["logs"] = [f for f in files if is_log is None or is_log(f)]
    point["outputs"] = [f for f in files if f not in point["logs"]]
    # A Serve replica's request log (one line per finished request) is a log wherever it points.
    point["logs"] += request_logs(pid, {(f["dev"], f["inode"]) for f in files})
    return point


def _lines(data: bytes, clean: Callable[[str], str] = redact, cut: bool = False) -> tuple[list[str], int]:
    """The text lines of `data`, each redacted before it is cut (a cut token is no longer
    recognisable), and the count of its bytes that are not text (never read as lines)."""
    lines, not_text = text_lines(data, cut=cut)
    return [clean(ln)[:LINE_CHARS] for ln in lines], not_text


def _read_range(path: str, start: int, end: int) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(max(0, start))
        return fh.read(max(0, end - start))


def _log_window(before: dict[str, Any], after: dict[str, Any], clean: Callable[[str], str] = redact) -> dict[str, Any]:
    """What a log file gained between two readings: bytes, text lines, the new lines, the tail
    before, how many of the new bytes are not text (`not_text_bytes`: counted, never quoted), and
    the exception lines that ended two or more of the window's tracebacks (`exceptions`: line,
    count; absent when none repeats)."""
    entry: dict[str, Any] = {"fd": after["fd"], "name": after["name"], "bytes": 0, "lines": 0,
                             "new": [], "tail": [], "age_s": None, "not_text_bytes": 0}
    entry["age_s"] = round(max(0.0, time.time() - float(after["mtime"])), 2)
    start, end = int(before["size"]), int(after["size"])
    try:
        if start > 0:
            head = _read_range(after["path"], max(0, start - TAIL_BYTES), start)
            piece = head.split(b"\n", 1)[-1] if start > TAIL_BYTES else head
            entry["tail"] = _lines(piece, clean, cut=True)[0][-TAIL_LINES:]
        if end < start:
            entry["rotated"] = True  # truncated or replaced: growth unknown
            return entry
        entry["bytes"] = end - start
        if end > start:
            data = _read_range(after["path"], start, min(end, start + MAX_NEW_BYTES))
            whole = end - start <= MAX_NEW_BYTES
            # A reading may end inside a character (a buffered writer splits its writes anywhere).
            lines, not_text = _lines(data, clean, cut=True)
            entry["lines"] = len(lines) if whole else None
            # Beyond the read, the unread rest is taken to be like what was read.
            entry["not_text_bytes"] = not_text if whole else round(not_text / max(1, len(data)) * (end - start))
            entry["new"] = lines[:NEW_LINES // 2] + lines[NEW_LINES // 2:][-(NEW_LINES // 2):]
            # The same traceback again and again (in the lines read): a crash repeated in the window.
            repeated = repeated_exceptions(lines)
            if repeated:
                entry["exceptions"] = repeated
    except OSError as exc:
        entry["error"] = f"{after['name']}: {exc.strerror or exc}"
    return entry


def _output_window(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """What a data file behind stdout/stderr gained: bytes only (it is never read)."""
    start, end = int((before or after)["size"]), int(after["size"])
    entry: dict[str, Any] = {"fd": after["fd"], "name": after["name"], "bytes": max(0, end - start)}
    if end < start:
        entry["rotated"] = True
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
    had = {(f["inode"], f["fd"]): f for f in before.get("outputs", [])}
    outputs = [_output_window(had.get((f["inode"], f["fd"])), f) for f in after.get("outputs", [])]
    if outputs:
        out["outputs"] = outputs
    return out
