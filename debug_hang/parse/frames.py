"""Frame-line helpers every reader shares: split `func (file:line)`, tell Python frames from native ones."""

from __future__ import annotations

import re

from debug_hang.model import Frame, Process

_PY_SUFFIXES = (".py", ".pyx", ".pyw", ".pyi")
_STDLIB_VERSION = re.compile(r"/lib/python(\d+\.\d+)/")
# Where a stack starts (outermost) and where threads block (innermost): the order of a list of
# frames printed without a header that says it.
_ENTRY = frozenset({"<module>", "_bootstrap", "_bootstrap_inner", "run", "main", "_run_module_as_main",
                    "_run_code", "_worker", "main_loop", "worker", "_process_worker"})
_LEAF = frozenset({"wait", "acquire", "_wait_for_tstate_lock", "get", "select", "poll", "_poll", "recv",
                   "recv_into", "_recv", "_recv_bytes", "read", "readline", "sleep", "accept", "connect",
                   "_acquireLock", "all_reduce", "barrier", "broadcast", "join", "get_objects", "result",
                   "__enter__", "wait_for", "synchronize", "_wait_for_data", "communicate"})
INNER_FIRST, OUTER_FIRST = "inner-first", "outer-first"
# What starts a poster's note on a frame line.
_NOTE_MARKS = (" <-", " \u2190", "  # ", " # <", "\t# ")


def orientation(frames: list[Frame], default: str) -> str:
    """Which way a headerless list of frames was written: from the entry point (`<module>`,
    `_bootstrap`) at one end or a wait at the other; `default` (the dialect's order) otherwise."""
    if len(frames) < 2:
        return default
    first = frames[0].function.rsplit(".", 1)[-1]
    last = frames[-1].function.rsplit(".", 1)[-1]
    if first in _ENTRY and last not in _ENTRY:
        return OUTER_FIRST
    if last in _ENTRY and first not in _ENTRY:
        return INNER_FIRST
    if first in _LEAF and last not in _LEAF:
        return INNER_FIRST
    if last in _LEAF and first not in _LEAF:
        return OUTER_FIRST
    return default


def split_frame(body: str) -> tuple[str, str, int | None]:
    """`func (file:line)` → (func, file, line); the location is the last parenthesised group
    (C++ names hold parentheses: `Foo::bar(int)::{lambda()#1}::operator() (lib.so)`). A note the
    poster added (`wait (threading.py:320) (blocks forever)`, `... <- here`) is not a location."""
    body = strip_note(body)
    at = body.rfind(" (")
    if at < 0 or not body.endswith(")"):
        return body, "", None
    loc = body[at + 2:-1]
    if "(" in loc or ")" in loc:
        return body, "", None
    head, sep, tail = loc.rpartition(":")
    if sep and tail.isdigit():
        return body[:at], head, int(tail)
    if " " in loc and body[:at].endswith(")"):  # `(some note)` after the real location
        return split_frame(body[:at])
    return body[:at], loc, None


def strip_note(body: str) -> str:
    """A frame line without the annotation a poster appended (`<- blocks forever`, `← stuck`,
    `  # waits here`)."""
    cut = len(body)
    for mark in _NOTE_MARKS:
        at = body.find(mark)
        if 0 < at < cut:
            cut = at
    return body[:cut].rstrip() if cut < len(body) else body


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
