"""Frame-line helpers every reader shares: split `func (file:line)`, tell Python frames from native ones."""

from __future__ import annotations

import re

from debug_hang.model import Process

_PY_SUFFIXES = (".py", ".pyx", ".pyw", ".pyi")
_STDLIB_VERSION = re.compile(r"/lib/python(\d+\.\d+)/")


def split_frame(body: str) -> tuple[str, str, int | None]:
    """`func (file:line)` → (func, file, line); the location is the last parenthesised group
    (C++ names hold parentheses: `Foo::bar(int)::{lambda()#1}::operator() (lib.so)`)."""
    at = body.rfind(" (")
    if at < 0 or not body.endswith(")"):
        return body, "", None
    loc = body[at + 2:-1]
    if "(" in loc or ")" in loc:
        return body, "", None
    head, sep, tail = loc.rpartition(":")
    if sep and tail.isdigit():
        return body[:at], head, int(tail)
    return body[:at], loc, None


def is_python_file(path: str) -> bool:
    """True for Python source frames (`x.py`, `<frozen ...>`, `<string>`); False for native ones
    (`libc.so.6`, `callproc.c`, `ray/_raylet.so`)."""
    return path.endswith(_PY_SUFFIXES) or path.startswith("<")


def python_from_paths(proc: Process) -> str | None:
    """The Python version a process's stdlib paths show (`/usr/lib/python3.11/threading.py`)."""
    for thread in proc.threads:
        for frame in thread.frames:
            match = _STDLIB_VERSION.search(frame.file)
            if match:
                return match.group(1)
    return None
