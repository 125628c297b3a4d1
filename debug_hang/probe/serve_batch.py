"""The @serve.batch windows of a Serve replica's deployment code, read from its source on the node.

A request handled by `@serve.batch(max_batch_size=N, batch_wait_timeout_s=T)` waits in the
batcher until N requests are there or T seconds have passed: with light traffic every batch waits
out its window, and the replica holds requests in flight, finishes none and logs nothing for T
seconds — a timed wait, not a stuck replica. The batcher's coroutine awaits (no stack), so the
window is read where it is declared: the job's files in the replica's working directory (its
cwd, where Ray unpacks the runtime env's working_dir), parsed with ast, bounded, never run.
Standard library only: shipped to the nodes by value (node_probe.SHIPPED).
"""

from __future__ import annotations

import ast
import os
from typing import Any

MAX_FILES = 200
MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 2
MAX_WINDOWS = 16
BATCH_ARGS = ("max_batch_size", "batch_wait_timeout_s", "max_concurrent_batches")
DEFAULTS: dict[str, float] = {"max_batch_size": 10, "batch_wait_timeout_s": 0.01, "max_concurrent_batches": 1}


def _sources(root: str) -> list[str]:
    """Python files under `root`, at most MAX_DEPTH folders down and MAX_FILES in all."""
    found: list[str] = []
    base = root.rstrip("/").count("/")
    for folder, dirs, files in os.walk(root):
        depth = folder.rstrip("/").count("/") - base
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__") if depth < MAX_DEPTH else []
        for name in sorted(files):
            if name.endswith(".py"):
                found.append(os.path.join(folder, name))
                if len(found) >= MAX_FILES:
                    return found
    return found


def _is_batch(deco: ast.expr) -> ast.Call | None:
    """The `@serve.batch(...)` / `@batch(...)` call of a decorator, or None."""
    if not isinstance(deco, ast.Call):
        return None
    func = deco.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return deco if name == "batch" else None


def _constant(node: ast.expr) -> float | None:
    value = node.value if isinstance(node, ast.Constant) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def windows_in(path: str) -> list[dict[str, Any]]:
    """The batch windows a file declares: {class, function, line, max_batch_size, ...}; an argument
    that is no literal number is left out (unknown), one not given takes Serve's default."""
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            return []
        with open(path, encoding="utf-8", errors="replace") as fh:
            tree = ast.parse(fh.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return []
    out: list[dict[str, Any]] = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for deco in fn.decorator_list:
                call = _is_batch(deco)
                if call is None:
                    continue
                found: dict[str, Any] = {"class": cls.name, "function": fn.name, "file": os.path.basename(path),
                                         "line": fn.lineno}
                given = {k.arg: k.value for k in call.keywords if k.arg in BATCH_ARGS}
                for arg in BATCH_ARGS:
                    if arg not in given:
                        found[arg] = DEFAULTS[arg]
                    elif (value := _constant(given[arg])) is not None:
                        found[arg] = value
                out.append(found)
    return out


def batch_windows(pid: int) -> list[dict[str, Any]]:
    """The @serve.batch windows declared in the job's files of a process's working directory."""
    try:
        root = os.readlink(f"/proc/{int(pid)}/cwd")
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for path in _sources(root):
        out.extend(windows_in(path))
        if len(out) >= MAX_WINDOWS:
            break
    return out[:MAX_WINDOWS]
