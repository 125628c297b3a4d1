"""Node side of PyTorch's Flight Recorder: where a process's dumps go, and reading them, bounded.

Stdlib only (this module is shipped to nodes). A process's Flight Recorder settings are read from
its start-up environment (`/proc/PID/environ`), and only the names in `FR_VARS`. Dump files are
named by torch `<prefix><global rank>` (the prefix is `TORCH_FR_DUMP_TEMP_FILE`, formerly
`TORCH_NCCL_DEBUG_INFO_TEMP_FILE`, default `/tmp/nccl_trace_rank_`); a `.json` twin is read as
well. Files are opened read-only, without following symlinks, only if regular, only if newer than
the oldest process that writes there (a file older than the job is another run's), and within
`MAX_DUMP_BYTES` each, `MAX_NODE_BYTES` and `MAX_DUMP_FILES` per node. Named pipes
(`TORCH_NCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe`) are only reported, never opened: writing to one
triggers a dump, and the diagnosis changes nothing.
"""

from __future__ import annotations

import base64
import os
import re
import stat
from typing import Any

FR_VARS = (
    "TORCH_FR_BUFFER_SIZE",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
)
PREFIX_VARS = ("TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
# torch's default dump prefix, used only when the process enables the recorder or its dump on timeout.
DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"
# A 2,000-entry buffer with Python stacks pickles to about 2-4 MB; 16 MB leaves room for bigger buffers.
MAX_DUMP_BYTES = 16 * 1024 * 1024
# Per node: enough for 8 ranks at the bound above, small enough to travel back in one Ray reply.
MAX_NODE_BYTES = 128 * 1024 * 1024
MAX_DUMP_FILES = 64
# A dump folder holding more entries than this is not scanned further (a shared /tmp can be huge).
MAX_SCAN_ENTRIES = 20_000
MAX_VALUE_CHARS = 512
_RANK_SUFFIX = re.compile(r"(\d{1,7})(\.json)?")


def read_fr_env(pid: int) -> dict[str, str]:
    """The Flight Recorder variables of a process's start-up environment (only `FR_VARS`)."""
    try:
        with open(f"/proc/{int(pid)}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    return fr_env_from_environ(raw)


def fr_env_from_environ(raw: bytes) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, _, value = item.partition(b"=")
        name = key.decode("ascii", "replace")
        if name in FR_VARS:
            found[name] = value.decode("utf-8", "replace")[:MAX_VALUE_CHARS]
    return found


def enabled(env: dict[str, str]) -> bool:
    """True when the process asked for the recorder, a dump path or the dump on timeout."""
    for name in ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"):
        if env.get(name, "").strip().isdigit() and int(env[name]) > 0:
            return True
    return any(env.get(n) for n in PREFIX_VARS) or env.get("TORCH_NCCL_DUMP_ON_TIMEOUT", "") not in ("", "0")


def valid_prefix(prefix: str) -> str | None:
    """The prefix if it is a usable absolute path (no NUL, no control characters, no `..`), else None."""
    if not prefix or len(prefix) > 1024 or not prefix.startswith("/"):
        return None
    if any(ord(c) < 32 for c in prefix) or "/../" in prefix + "/" or prefix.endswith("/.."):
        return None
    return prefix


def dump_prefixes(env: dict[str, str]) -> list[str]:
    """Where a process with this environment writes its dumps (validated, in torch's order of preference)."""
    found = [p for p in (valid_prefix(env.get(n, "")) for n in PREFIX_VARS) if p]
    if not any(env.get(n) for n in PREFIX_VARS) and enabled(env):
        found = [DEFAULT_PREFIX]  # torch's default, only when no path was given (an unusable one is not guessed)
    return list(dict.fromkeys(found))


def process_start_epoch(pid: int) -> float | None:
    """When a process started (epoch seconds), from /proc/PID/stat and the boot time."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="utf-8", errors="replace") as fh:
            ticks = int(fh.read().rsplit(")", 1)[-1].split()[19])
        with open("/proc/stat", encoding="ascii", errors="replace") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
    except (OSError, IndexError, ValueError, StopIteration):
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return btime + ticks / hz


def collect_dumps(envs: dict[int, dict[str, str]], max_files: int = MAX_DUMP_FILES,
                  max_bytes: int = MAX_DUMP_BYTES, max_node_bytes: int = MAX_NODE_BYTES) -> dict[str, Any]:
    """Read the dump files the processes in `envs` ({pid: FR env}) write, on this node.

    Result: {"dumps": [{"path", "rank", "format", "size", "mtime", "data_b64"}], "skipped":
    [{"path", "reason"}], "pipes": [path], "prefixes": [prefix]}. Never raises.
    """
    oldest: dict[str, float] = {}
    pipes: list[str] = []
    for pid, env in envs.items():
        started = process_start_epoch(pid)
        for prefix in dump_prefixes(env):
            if started is not None:
                oldest[prefix] = min(oldest.get(prefix, started), started)
            else:
                oldest.setdefault(prefix, 0.0)
        pipe = valid_prefix(env.get("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", ""))
        if pipe:
            pipes.extend(_pipes(pipe))
    dumps: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    total = 0
    for prefix, since in oldest.items():
        for path, rank, fmt in _candidates(prefix, skipped):
            if len(dumps) >= max_files:
                skipped.append({"path": path, "reason": f"more than {max_files} dump files on this node"})
                continue
            item = _read_one(path, since, min(max_bytes, max_node_bytes - total), skipped)
            if item is None:
                continue
            data, mtime = item
            total += len(data)
            dumps.append({"path": path, "rank": rank, "format": fmt, "size": len(data), "mtime": mtime,
                          "data_b64": base64.b64encode(data).decode("ascii")})
    return {"dumps": dumps, "skipped": skipped, "pipes": sorted(set(pipes)), "prefixes": sorted(oldest)}


def _candidates(prefix: str, skipped: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    folder, base = os.path.split(prefix)
    found: list[tuple[str, int, str]] = []
    try:
        with os.scandir(folder or "/") as it:
            for n, entry in enumerate(it):
                if n >= MAX_SCAN_ENTRIES:
                    skipped.append({"path": folder, "reason": f"folder has more than {MAX_SCAN_ENTRIES} entries; "
                                    "the rest was not scanned"})
                    break
                if not entry.name.startswith(base):
                    continue
                m = _RANK_SUFFIX.fullmatch(entry.name[len(base):])
                if m:
                    found.append((os.path.join(folder, entry.name), int(m.group(1)), "json" if m.group(2) else "pickle"))
    except OSError as exc:
        skipped.append({"path": folder, "reason": f"cannot list: {exc.strerror or exc}"})
    return sorted(found, key=lambda c: (c[1], c[2]))


def _read_one(path: str, since: float, limit: int, skipped: list[dict[str, Any]]) -> tuple[bytes, float] | None:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        before = os.lstat(path)
        if not stat.S_ISREG(before.st_mode):
            skipped.append({"path": path, "reason": "not a regular file"})
            return None
        if before.st_mtime < since:
            skipped.append({"path": path, "reason": "older than the processes that write there (another run's)"})
            return None
        if before.st_size > limit:
            skipped.append({"path": path, "reason": f"{before.st_size} bytes, over the {limit}-byte bound"})
            return None
        fd = os.open(path, flags)
    except OSError as exc:
        skipped.append({"path": path, "reason": f"cannot open: {exc.strerror or exc}"})
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_ino != before.st_ino:
            skipped.append({"path": path, "reason": "changed while being opened"})
            return None
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        skipped.append({"path": path, "reason": f"cannot read: {exc.strerror or exc}"})
        return None
    finally:
        os.close(fd)
    if len(data) > limit:
        skipped.append({"path": path, "reason": f"grew over the {limit}-byte bound while read"})
        return None
    return data, st.st_mtime


def _pipes(prefix: str) -> list[str]:
    folder, base = os.path.split(prefix)
    try:
        with os.scandir(folder or "/") as it:
            return [os.path.join(folder, e.name) for _, e in zip(range(MAX_SCAN_ENTRIES), it, strict=False)
                    if e.name.startswith(base) and e.name.endswith(".pipe")
                    and re.fullmatch(r"\d{1,7}\.pipe", e.name[len(base):])][:MAX_DUMP_FILES]
    except OSError:
        return []
