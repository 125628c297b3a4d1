"""The shapes stacks take once people paste them: frames without headers, arrows, Markdown.

The readers (`reader.py` and the family modules) read the dumps; this module holds what they need
to read them when they are not a tool's clean output:

- bare frames (`func (file:line)` with a file-like location), a thread name alone on its line,
  `...` elisions;
- arrow chains (`_poll → poll → get`, `a -> b`): function names only, in either order;
- Markdown damage: a dump pasted outside a fence and rendered loses `<...>` (`<module>`,
  `<locals>`) and the underscores of `__init__` (`logging/init.py`, `Handler.init`).

Everything here is linear in the input: lines are cut at `MAX_LINE` before any regex, and no
pattern backtracks over a run of spaces.
"""

from __future__ import annotations

import re

from debug_hang.parse.frames import strip_note

# Characters of a line examined by any pattern: a stack line is < 1 KB; a collective mismatch
# message ~1 KB per rank; longer lines are cut (and counted in a warning).
MAX_LINE = 16384
# A frame line outside a thread header: `func (file:line)`, `func (file)`, ` (file:line)`.
_LOCATION = re.compile(
    r"^(?:[^()\s]*\.(?:py|pyx|pxi|pyi|pyw|so(?:\.[\d.]+)?|c|cc|cpp|h|rs)(?::\d+)?"
    r"|<(?:frozen [\w.]+|string|stdin)>(?::\d+)?)$"
)
# A frame in aligned columns: a function, two or more spaces, a Python file with a line number.
_ALIGNED = re.compile(r"^(?P<func>[^\s()]{1,300}) {2,}(?P<loc>[^\s()]{1,1000}:\d{1,7})$")
# A thread name alone on its line: `MainThread:`, `Thread-1 (FlushWorker):`, `AsyncIO Thread: default:`.
NAME_HEADER = re.compile(r"^(?P<name>[A-Za-z_][\w.\-]*(?: [\w.\-()<>#]+){0,2}):$")
ELISION = re.compile(r"^\s*(?:\.\.\.|…)(?:\s*[\[(]?\d+ (?:more )?frames?.*)?$")

_ARROW = re.compile(r"\s*(?:→|->|=>|⟶|⇒)\s*")
_ARROW_ITEM = re.compile(r"^(?P<func>[\w.<>\[\]]{1,300}?)(?:\(\))?(?: \((?P<loc>[^()]*)\))?$")
# Functions that start a stack (outermost) and that a thread blocks in (innermost): they tell
# which way an arrow chain was written. Without either, dumps' own order (innermost first).
_ENTRY = frozenset({"<module>", "main", "_bootstrap", "_bootstrap_inner", "run", "main_loop",
                    "_run_module_as_main", "_run_code", "_worker"})
_LEAF = frozenset({"wait", "acquire", "_wait_for_tstate_lock", "get_objects", "select", "poll",
                   "_poll", "recv", "recv_into", "read", "sleep", "accept", "_acquireLock",
                   "all_reduce", "barrier", "broadcast", "join"})

# Markdown rendering of an unfenced paste: `<module>`/`<locals>` vanish (HTML tags), `__x__`
# turns bold and loses its underscores.
MARKDOWN_SIGNS = re.compile(r"(?:^|[/( ])init\.py[:)]|\w\.\.\w|^ \([^()]+\)$", re.MULTILINE)
_DUNDERS = frozenset({"init", "del", "call", "enter", "exit", "aenter", "aexit", "iter", "next",
                      "getattr", "getitem", "setitem", "repr", "str", "new", "post_init"})
_INIT_FILE = re.compile(r"(^|/)(init|main)\.py$")
# A Markdown quote (`> ` per level).
QUOTE = re.compile(r"^(?:> ?)+")


def loose_frame(body: str) -> tuple[str, str, int | None] | None:
    """`func (file:line)` with a file-like location → (func, file, line), or the same aligned in
    columns (`func    path/file.py:50`); a poster's note after it is dropped; None otherwise."""
    body = strip_note(body)
    if not body.endswith(")"):
        return aligned_frame(body)
    at = body.rfind(" (")
    if at < 0:
        if not body.startswith("("):
            return None
        at = -1  # ` (file:line)` whose function Markdown removed (`<module>`)
    loc = body[at + 2:-1]
    if not _LOCATION.match(loc):
        if " " in loc and at > 0:  # `func (file.py:12) (some note)`: the note is not the location
            return loose_frame(body[:at])
        return None
    func = body[:at].strip() if at >= 0 else ""
    file, sep, tail = loc.rpartition(":")
    if sep and tail.isdigit():
        return func, file, int(tail)
    return func, loc, None


def aligned_frame(body: str) -> tuple[str, str, int | None] | None:
    """`func    path/to/file.py:50` (columns a poster aligned) → (func, file, line)."""
    match = _ALIGNED.match(body)
    if match is None or not _LOCATION.match(match.group("loc")):
        return None
    file, _, line = match.group("loc").rpartition(":")
    return match.group("func"), file, int(line)


def arrow_chain(line: str) -> tuple[str | None, list[tuple[str, str, int | None]], bool] | None:
    """`[Name: ]a → b → c` → (thread name, frames innermost first, whether it was reversed);
    None when the line is not a chain of function names."""
    if "→" not in line and "->" not in line and "=>" not in line and "⟶" not in line and "⇒" not in line:
        return None
    name = None
    head, sep, rest = line.partition(": ")
    if sep and NAME_HEADER.match(head + ":") and _ARROW.search(rest):
        name, line = head, rest
    parts = _ARROW.split(line.strip())
    if len(parts) < 2:
        return None
    items: list[tuple[str, str, int | None]] = []
    for part in parts:
        match = _ARROW_ITEM.match(part.strip().strip("`*"))
        if match is None:
            return None
        loc = match.group("loc") or ""
        file, colon, tail = loc.rpartition(":")
        if colon and tail.isdigit():
            items.append((match.group("func"), file, int(tail)))
        else:
            items.append((match.group("func"), loc, None))
    first, last = items[0][0].rsplit(".", 1)[-1], items[-1][0].rsplit(".", 1)[-1]
    outer_first = first in _ENTRY or (last in _LEAF and first not in _LEAF)
    if outer_first:
        items.reverse()
    return name, items, outer_first


def repair_markdown(func: str, file: str) -> tuple[str, str]:
    """Undo what a Markdown renderer did to a frame: `X..y` → `X.<locals>.y`, an empty name →
    `?`, `Handler.init` → `Handler.__init__`, `logging/init.py` → `logging/__init__.py`."""
    if ".." in func:
        func = func.replace("..", ".<locals>.")
    if not func:
        func = "?"
    head, dot, tail = func.rpartition(".")
    if tail in _DUNDERS and (dot or file):
        func = f"{head}{dot}__{tail}__"
    if file.endswith(("init.py", "main.py")):
        file = _INIT_FILE.sub(r"\1__\2__.py", file)
    return func, file
