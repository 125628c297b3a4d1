#!/usr/bin/env python3
"""Reshape real dumps recorded here the way people paste them into issues and chats.

Every output in ../reshaped/ is made by one transform below from one real capture (py-spy dumps
of hung Ray jobs in tests/data/dumps and tests/data/formats, and the captures this folder's
recorders made); ../reshaped/INDEX.md lists, for each file, its source and the transform. Run it
again to regenerate them (deterministic). The Markdown rendering uses markdown-it-py (CommonMark),
installed outside the project venv: `pip install --target /tmp/mdit markdown-it-py` then
`PYTHONPATH=/tmp/mdit python reshape.py`.

Usage: python reshape.py
"""

from __future__ import annotations

import glob
import html
import os
import re
import sys
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(os.path.dirname(HERE))  # tests/data
OUT = os.path.join(os.path.dirname(HERE), "reshaped")

_PROCESS = re.compile(r"^Process \d+: .*\n(?:Python v.*\n)?\n?", re.MULTILINE)
_THREAD_ID = re.compile(r"^Thread \d+ \(", re.MULTILINE)
_THREAD = re.compile(r'^Thread \S+ \((?:idle|active|active\+gil)\): "(?P<name>[^"]*)"$')


def read(rel: str) -> str:
    path = rel if os.path.isabs(rel) else os.path.join(DATA, rel)
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def threads(dump: str) -> list[tuple[str, list[str]]]:
    """(thread name, frame lines without indentation) of a py-spy text dump."""
    out: list[tuple[str, list[str]]] = []
    for line in dump.splitlines():
        m = _THREAD.match(line)
        if m:
            out.append((m.group("name"), []))
        elif line.startswith("    ") and out:
            out[-1][1].append(line.strip())
    return out


def fenced(lang: str) -> Callable[[str], str]:
    def t(dump: str) -> str:
        return f"Here is the stack dump of the hung worker:\n\n```{lang}\n{dump.rstrip()}\n```\n\nAny idea?\n"
    return t


def header_on_fence(dump: str) -> str:
    return "Stack of the stuck actor:\n```" + dump.rstrip() + "\n```\n"


def frames_only(indent: str, thread_index: int = 0) -> Callable[[str], str]:
    """The dashboard's Stack Trace view copied without its headers: one thread's frames."""
    def t(dump: str) -> str:
        return "".join(f"{indent}{f}\n" for f in threads(dump)[thread_index][1])
    return t


def no_thread_ids(dump: str) -> str:
    return _THREAD_ID.sub("Thread (", _PROCESS.sub("", dump))


def named_threads(dump: str) -> str:
    """Thread names on their own line (`MainThread:`), bare frames below, a blank line between."""
    return "\n".join(f"{name}:\n" + "".join(f"{f}\n" for f in frames) for name, frames in threads(dump))


def elided(dump: str) -> str:
    """Frames between the third and the last two of each thread replaced by `    ...`."""
    out = []
    for block in re.split(r"(?m)^(?=Thread )", dump):
        lines = block.splitlines()
        head = [ln for ln in lines if not ln.startswith("    ")]
        frames = [ln for ln in lines if ln.startswith("    ")]
        if len(frames) > 6:
            frames = frames[:3] + ["    ..."] + frames[-2:]
        out.append("\n".join(head[:1] + frames + head[1:]))
    return "\n".join(out) + "\n"


def arrows(sep: str, with_names: bool) -> Callable[[str], str]:
    """Each thread as one line of function names, outermost first, joined by `sep`."""
    def t(dump: str) -> str:
        lines = []
        for name, frames in threads(dump):
            names = [f.rsplit(" (", 1)[0].rsplit(".", 1)[-1] for f in reversed(frames)]
            lines.append((f"{name}: " if with_names else "") + sep.join(names))
        return "\n".join(lines) + "\n"
    return t


def markdown_rendered(dump: str) -> str:
    """The dump pasted outside a code fence, rendered by a CommonMark renderer and copied back
    as text: `__init__` turns bold and loses its underscores, leading spaces are dropped."""
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(dump)
    text = re.sub(r"<br\s*/?>", "\n", rendered)
    text = re.sub(r"</p>\s*<p>", "\n\n", text)
    return html.unescape(re.sub(r"<[^>]+>", "", text)).strip() + "\n"


def first(pattern: str) -> str:
    return sorted(glob.glob(os.path.join(DATA, pattern)))[0]


# (output file, source, transform, description)
SHAPES: list[tuple[str, str, Callable[[str], str], str]] = [
    ("fenced-text.md", "dumps/dead_rank/TrainWorker-14680.txt", fenced("text"),
     "the whole dump inside a ```text fence, with chat text around it"),
    ("fenced-python.md", "dumps/chain_three_actors/Trainer-21931.txt", fenced("python"),
     "the whole dump inside a ```python fence"),
    ("header-on-fence.md", "dumps/dead_rank/TrainWorker-14680.txt", header_on_fence,
     "the fence opened on the same line as `Process N: ...` (```Process 14680: ...)"),
    ("frames-only.txt", "dumps/chain_three_actors/Trainer-21931.txt", frames_only(""),
     "the main thread's frames only, no process or thread header, not indented"),
    ("frames-only-indented.txt", "dumps/dead_rank/TrainWorker-14680.txt", frames_only("    "),
     "the main thread's frames only, indented by 4 spaces as py-spy prints them"),
    ("thread-no-id.txt", "pastes/interrupted/pyspy.txt", no_thread_ids,
     "process header dropped and thread ids removed: `Thread (idle): \"MainThread\"`"),
    ("named-threads.txt", "pastes/interrupted/pyspy.txt", named_threads,
     "thread names on their own line (`MainThread:`), bare unindented frames below"),
    ("named-threads-deadlock.txt", "formats/pyspy/threads.txt", named_threads,
     "same shape, on the two-lock deadlock target (deadlock-left / deadlock-right)"),
    ("elided.txt", "dumps/chain_three_actors/Trainer-21931.txt", elided,
     "frames between the 3rd and the last 2 of each long thread replaced by `    ...`"),
    ("arrows.txt", "pastes/interrupted/pyspy.txt", arrows(" → ", True),
     "each thread as `Name: outer → ... → inner` function names on one line"),
    ("arrows-ascii.txt", "dumps/chain_three_actors/Trainer-21931.txt", arrows(" -> ", False),
     "each thread as `outer -> ... -> inner` with no thread name"),
    ("markdown-rendered.txt", "dumps/dead_rank/TrainWorker-14680.txt", markdown_rendered,
     "pasted without a fence: CommonMark-rendered and copied back (`__init__` loses its "
     "underscores, indentation lost)"),
    ("markdown-rendered-logging.txt", "pastes/interrupted-logging/pyspy.txt", markdown_rendered,
     "same rendering on a FileHandler blocked on logging's module lock: `logging/__init__.py` "
     "becomes `logging/init.py`, `Handler.__init__` becomes `Handler.init`"),
    ("markdown-rendered-queue.txt", "pastes/ray_worker_logs/actor-*.txt", markdown_rendered,
     "same rendering on a Ray actor blocked in queue.Queue.get"),
]


def main() -> int:
    if sys.argv[1:]:
        print(__doc__)
        return 0 if sys.argv[1:] in (["-h"], ["--help"]) else 2
    os.makedirs(OUT, exist_ok=True)
    index = ["# Pasted shapes made from real captures (generated by recorders/reshape.py)", "",
             "| file | source (tests/data/...) | transform |", "|---|---|---|"]
    for name, source, transform, description in SHAPES:
        path = first(source) if "*" in source else os.path.join(DATA, source)
        with open(os.path.join(OUT, name), "w", encoding="utf-8") as fh:
            fh.write(transform(read(path)))
        index.append(f"| `{name}` | `{os.path.relpath(path, DATA)}` | {description} |")
    with open(os.path.join(OUT, "INDEX.md"), "w", encoding="utf-8") as fh:
        fh.write("\n".join(index) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
