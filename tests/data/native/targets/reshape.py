#!/usr/bin/env python3
"""Reshape real captures of tests/data/native/ the way people shorten or annotate them in issues.

Every file in ../reshaped/ is made by one transform below from one real capture recorded here;
../reshaped/INDEX.md names each file's source and transform. Deterministic: run it again to
regenerate them. Usage: python reshape.py
"""

from __future__ import annotations

import os
import re
import textwrap
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
NATIVE = os.path.dirname(HERE)
OUT = os.path.join(NATIVE, "reshaped")
_PYSPY_THREAD = re.compile(r'^Thread \S+ \((?:idle|active|active\+gil)\): "(?P<name>[^"]*)"$')
_PYSPY_FRAME = re.compile(r"^    (?P<func>\S.*?) \((?P<loc>[^()]*)\)$")


def read(rel: str) -> str:
    with open(os.path.join(NATIVE, rel), encoding="utf-8") as fh:
        return fh.read()


def dedent_all(dump: str) -> str:
    """Indentation lost (a chat that strips leading spaces)."""
    return "".join(line.lstrip() + "\n" for line in dump.splitlines())


def first_thread_only(dump: str) -> str:
    """One faulthandler thread's frames, its `Thread 0x.. (most recent call first):` header cut."""
    blocks = [b for b in dump.split("\n\n") if b.strip()]
    lines = blocks[0].splitlines()[1:]
    return "\n".join(lines) + "\n"


def annotated(note_style: str) -> Callable[[str], str]:
    """py-spy's frames without the process header; the innermost frame of the first thread that is
    in the job's own file annotated by the poster."""
    def t(dump: str) -> str:
        out: list[str] = []
        noted = False
        for line in dump.splitlines():
            if line.startswith(("Process ", "Python v")) or not line.strip():
                continue
            frame = _PYSPY_FRAME.match(line)
            if frame is not None and not noted and "native_locks" in frame.group("loc"):
                noted = True
                if note_style == "arrow":
                    line = f"{line}   <- blocks forever"
                elif note_style == "paren":
                    line = f"{line} (this never returns)"
            out.append(line.strip() if note_style == "paren" else line)
        return "\n".join(out) + "\n"
    return t


def aligned(dump: str) -> str:
    """Frames retyped in two columns (function, file:line), thread names on their own line."""
    out: list[str] = []
    for line in dump.splitlines():
        thread = _PYSPY_THREAD.match(line)
        if thread is not None:
            out.append(f"{thread.group('name')}:")
            continue
        frame = _PYSPY_FRAME.match(line)
        if frame is not None:
            note = "  <-- stuck here" if not out[-1].endswith(":") else ""
            note = "" if out and not out[-1].endswith(":") else "  <-- stuck here"
            out.append(f"  {frame.group('func'):<40}{frame.group('loc')}{note}")
    return "\n".join(out) + "\n"


def wrapped(width: int) -> Callable[[str], str]:
    """Long lines wrapped at `width` columns, as a mail client or a narrow chat does."""
    def t(dump: str) -> str:
        out: list[str] = []
        for line in dump.splitlines():
            out.extend(textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False,
                                     drop_whitespace=True) or [""])
        return "\n".join(out) + "\n"
    return t


def pybt_blocks_only(dump: str) -> str:
    """gdb's py-bt listings pasted without gdb's lines: the `Traceback (most recent call first):`
    blocks only, a blank line between them."""
    out: list[str] = []
    keep = False
    for line in dump.splitlines():
        if line.startswith("Traceback (most recent call first):"):
            keep = True
            out.append("")
        elif not line.startswith("  "):
            keep = False
        if keep:
            out.append(line)
    return "\n".join(out).strip() + "\n"


def one_gdb_thread(dump: str) -> str:
    """The `#0 ... #N` frames of gdb's first thread, as pasted from a longer `thread apply all bt`."""
    blocks = dump.split("\n\n")
    frames = next(b for b in blocks if b.startswith("Thread "))
    return "\n".join(frames.splitlines()[1:]) + "\n"


TRANSFORMS: list[tuple[str, str, Callable[[str], str], str]] = [
    ("faulthandler-column0.txt", "dialects/faulthandler.txt", dedent_all,
     "faulthandler's dump with every line's indentation stripped (`File \"..\", line N in f` at column 0)"),
    ("faulthandler-no-header.txt", "dialects/faulthandler.txt", first_thread_only,
     "one thread's faulthandler frames, its `Thread 0x..` header cut"),
    ("pyspy-annotated.txt", "gil/py-spy.txt", annotated("arrow"),
     "py-spy frames, process header cut, the blocking frame annotated `<- blocks forever`"),
    ("pyspy-paren-note.txt", "mutex/py-spy.txt", annotated("paren"),
     "py-spy frames unindented, process header cut, `(this never returns)` after the blocking frame"),
    ("pyspy-aligned.txt", "mutex/py-spy.txt", aligned,
     "py-spy frames retyped in aligned columns (`func    file.py:50`), names on their own line, `<-- stuck here`"),
    ("mismatch-wrapped.log", "torch/mismatch.log", wrapped(100),
     "torchrun's DETAIL mismatch log with lines wrapped at 100 columns"),
    ("gdb-py-bt-blocks.txt", "gil/gdb-py-bt.txt", pybt_blocks_only,
     "gdb's py-bt listings without gdb's own lines (only the `Traceback (most recent call first):` blocks)"),
    ("gdb-one-thread.txt", "cpp/gdb-all-bt.txt", one_gdb_thread,
     "the `#0 .. #N` frames of one gdb thread, no header"),
]


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    index = ["# Pasted shapes made from real captures (generated by targets/reshape.py)", "",
             "| file | source (tests/data/native/...) | transform |", "|---|---|---|"]
    for name, source, transform, what in TRANSFORMS:
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as fh:
            fh.write(transform(read(source)))
        index.append(f"| `{name}` | `{source}` | {what} |")
    with open(os.path.join(OUT, "INDEX.md"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(index) + "\n")


if __name__ == "__main__":
    main()
