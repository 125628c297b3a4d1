"""The shapes stacks take once people paste them: log prefixes, tracebacks, arrows, Markdown.

`parsers.py` reads the dumps; this module holds what it needs to read them when they are not a
tool's clean output:

- `demux`: one merged log holding several processes' lines, each line prefixed by its source
  (torch's `[rank1]: `, torchrun's `[default0]:`, Ray's `(RayTrainWorker pid=123) ` or
  `(pid=123, ip=10.0.0.1) `), split into one stream per source, so interleaved tracebacks and
  dumps are read apart and each process keeps its rank or pid.
- Python tracebacks (`Traceback (most recent call last):`, `  File "x.py", line N, in f`).
- Arrow chains (`_poll → poll → get`, `a -> b`): function names only, in either order.
- Markdown damage: a dump pasted outside a fence and rendered loses `<...>` (`<module>`,
  `<locals>`) and the underscores of `__init__` (`logging/init.py`, `Handler.init`).
- `collective_facts`: PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL "Detected mismatch between
  collectives on ranks" message, as one fact per rank (op, sequence number, shapes, dtypes).

Everything here is linear in the input: lines are cut at `MAX_LINE` before any regex, and no
pattern backtracks over a run of spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Characters of a line examined by any pattern: a stack line is < 1 KB; a collective mismatch
# message ~1 KB per rank; longer lines are cut (and counted in a warning).
MAX_LINE = 16384
# Characters examined for a log prefix at the start of a line.
_PREFIX_SPAN = 300

_STREAM_PREFIX = re.compile(
    r"\[(?P<tag>rank|default)(?P<num>\d{1,7})\]: ?"
    r"|\((?:(?P<name>[A-Za-z_][\w.:<>-]{0,200}) )?pid=(?P<pid>\d{1,10})"
    r"(?:, ip=(?P<ip>[0-9A-Fa-f.:]{1,64}))?(?:, [^()]{0,200})?\) ?"
)
_RAY_DEDUP = re.compile(r" ?\[repeated \d+x across cluster\]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

TRACEBACK_START = "Traceback (most recent call last):"
TB_FRAME = re.compile(r'^ {0,8}File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.+)$')
# The line that ends a traceback: `KeyboardInterrupt`, `RuntimeError: ...`, `ray.exceptions.X: ...`.
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]{0,200}(?:Error|Exception|Interrupt|Exit|Warning|Timeout)\b"
                            r"|^[A-Za-z_][\w.]{0,200}: ")
QUOTE = re.compile(r"^(?:> ?)+")
# Where a RayTaskError's remote frames ran: `RayTaskError(X): ray::Cls.method() (pid=N, ip=A, ...)`.
RAY_ORIGIN = re.compile(r"ray::(?P<name>[\w.<>-]{1,200})\(\) \(pid=(?P<pid>\d{1,10}), ip=(?P<ip>[0-9A-Fa-f.:]{1,64})")
TB_CHAINED = ("During handling of the above exception, another exception occurred:",
              "The above exception was the direct cause of the following exception:")
TB_THREAD = re.compile(r"^Exception in thread (?P<name>.{1,200}?):$")
TB_NOISE = re.compile(r"^\s*[\^~]+$")
TB_REPEATED = re.compile(r"^\s*\[Previous line repeated (?P<n>\d{1,9}) more times?\]$")
# Frames a `[Previous line repeated N more times]` line adds back (a RecursionError says 996).
MAX_REPEATED = 1000

# A frame line outside a thread header: `func (file:line)`, `func (file)`, ` (file:line)`.
_LOCATION = re.compile(
    r"^(?:[^()\s]*\.(?:py|pyx|pxi|pyi|pyw|so(?:\.[\d.]+)?|c|cc|cpp|h|rs)(?::\d+)?"
    r"|<(?:frozen [\w.]+|string|stdin)>(?::\d+)?)$"
)
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

_MISMATCH = "Detected mismatch between collectives on ranks"
_RANK_RUNNING = re.compile(r"Rank (?P<rank>\d{1,7}) is running (?:inconsistent )?collective: ")
_FP_FIELDS = {
    "sequence": re.compile(r"SequenceNumber=(\d{1,20})"),
    "op": re.compile(r"OpType=(\w{1,40})"),
    "shapes": re.compile(r"TensorShape=\[([^\]]{0,400})\]"),
    "dtypes": re.compile(r"TensorDtypes=(\w{1,40})"),
}


@dataclass
class Stream:
    """The lines of one source of a merged log (one rank, one Ray worker), prefixes removed."""

    key: str
    pid: int | None = None
    rank: int | None = None
    name: str | None = None
    node_ip: str | None = None
    lines: list[str] = field(default_factory=list)


def demux(text: str) -> list[Stream] | None:
    """Split a merged log by line prefix; None when no line carries a known prefix.

    Unprefixed lines form the stream with key "" (the driver's own output). Ray's log dedup
    note (`[repeated 2x across cluster]`) is removed; the lines Ray folded are not in the text.
    """
    if "pid=" not in text and "[rank" not in text and "[default" not in text:
        return None
    streams: dict[str, Stream] = {}
    found = False
    for line in text.split("\n"):
        match = None
        if line[:1] in ("[", "(", "\x1b"):
            head = line[:_PREFIX_SPAN]
            if head[:1] == "\x1b":
                clean = _ANSI.sub("", head)
                match = _STREAM_PREFIX.match(clean)
                if match is not None:
                    line = clean[match.end():] + line[_PREFIX_SPAN:]
            else:
                match = _STREAM_PREFIX.match(head)
                if match is not None:
                    line = line[match.end():]
        if match is None:
            key, stream = "", streams.get("")
            if stream is None:
                stream = streams[""] = Stream("")
        else:
            found = True
            key = match.group(0).strip()
            stream = streams.get(key)
            if stream is None:
                stream = streams[key] = _stream(key, match)
        if "across cluster]" in line:
            line = _RAY_DEDUP.sub("", line, count=1)
        stream.lines.append(line)
    return list(streams.values()) if found else None


def _stream(key: str, match: re.Match[str]) -> Stream:
    if match.group("tag") == "rank":
        return Stream(key, rank=int(match.group("num")))
    if match.group("tag") == "default":  # torchrun --tee: the local rank of role "default"
        return Stream(key, rank=int(match.group("num")))
    return Stream(key, pid=int(match.group("pid")), name=match.group("name"),
                  node_ip=match.group("ip"))


def loose_frame(body: str) -> tuple[str, str, int | None] | None:
    """`func (file:line)` with a file-like location → (func, file, line); None otherwise."""
    if not body.endswith(")"):
        return None
    at = body.rfind(" (")
    if at < 0:
        if not body.startswith("("):
            return None
        at = -1  # ` (file:line)` whose function Markdown removed (`<module>`)
    loc = body[at + 2:-1]
    if not _LOCATION.match(loc):
        return None
    func = body[:at].strip() if at >= 0 else ""
    file, sep, tail = loc.rpartition(":")
    if sep and tail.isdigit():
        return func, file, int(tail)
    return func, loc, None


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


def collective_facts(line: str, lineno: int) -> list[dict[str, Any]]:
    """One fact per rank named in a TORCH_DISTRIBUTED_DEBUG=DETAIL mismatch message:
    {"rank", "op", "sequence", "shapes", "dtypes", "reported_by", "line", "source"}."""
    at = line.find(_MISMATCH)
    if at < 0:
        return []
    starts = list(_RANK_RUNNING.finditer(line, at))
    facts: list[dict[str, Any]] = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(line)
        differ = line.find("Collectives differ", match.end(), end)
        end = differ if differ >= 0 else end
        chunk = line[match.end():end]
        fact: dict[str, Any] = {"rank": int(match.group("rank"))}
        for key, regex in _FP_FIELDS.items():
            found = regex.search(chunk)
            if found is not None:
                fact[key] = int(found.group(1)) if key == "sequence" else found.group(1)
        fact["reported_by"] = int(starts[0].group("rank"))
        fact["line"] = lineno
        fact["source"] = "TORCH_DISTRIBUTED_DEBUG=DETAIL collective mismatch message"
        facts.append(fact)
    return facts
