"""JSON dumps found anywhere in an input: py-spy's `dump --json` (a list of threads), a
`debug-hang/stacks/v1` document, run_on_each_ray_node.py's `debug-hang/node-stacks/v1`.

A value cut short keeps its complete elements. Each character is decoded a bounded number of
times: a failed value's span is never tried again from inside, a decode costs the value's size
(not its offset), and nesting deeper than the recursion limit is skipped whole.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from debug_hang.model import STACKS_SCHEMA, Process, stacks_from_dict
from debug_hang.parse.state import ReaderState
from debug_hang.probe.pyspy import processes_from_pyspy_json

NODE_STACKS_SCHEMA = "debug-hang/node-stacks/v1"  # run_on_each_ray_node.py --dump --json
_SCHEMA_FIELD = re.compile(r'"schema"\s*:\s*"' + re.escape(STACKS_SCHEMA) + '"')
_PROCESSES_FIELD = re.compile(r'"processes"\s*:\s*\[')
_OPEN_BRACKET = re.compile(r"[\[{]")
_JSON_GAP = re.compile(r"[ \t\r\n,]*")
_JSON_WINDOW = 65536  # characters decoded first from a JSON start (doubled while cut)


class JsonDumps(ReaderState):
    """JSON values at the start of a line (or after the previous value on it)."""

    def json_at(self, pos: int, lineno: int) -> int:
        """Decode a JSON value starting at `pos`; returns the offset after it (pos if none).

        Only `[{` (py-spy's list of threads) and `{"` (a document) are tried; a failed value's
        span is never tried again from inside, and nesting deeper than the recursion limit is
        skipped whole: each character is decoded a bounded number of times."""
        text = self.text
        head = text[pos + 1:pos + 80].lstrip()[:1]
        if head != ("{" if text[pos] == "[" else '"'):
            return pos
        try:
            value, end = _decode_at(text, pos)
        except RecursionError:
            self.json_failed_until = self._nesting_end(pos)
            self.warnings.append(f"line {lineno}: JSON nested deeper than {sys.getrecursionlimit()} "
                                 "levels: not a stack dump, read as text")
            return pos
        except ValueError as exc:
            after = self.json_partial(pos, lineno)
            if after == pos:
                err = exc.at if isinstance(exc, _JSONFailed) else pos
                self.json_failed_until = max(self.json_failed_until, err)
            return after
        if self.json_value(value, lineno):
            return end
        self.json_failed_until = end
        return pos

    def _nesting_end(self, pos: int) -> int:
        """Where the run of brackets that made the decoder recurse too deep ends (linear scan)."""
        limit = sys.getrecursionlimit()
        for i, match in enumerate(_OPEN_BRACKET.finditer(self.text, pos)):
            if i >= limit:
                return match.end()
        return len(self.text)

    def json_value(self, value: Any, lineno: int) -> bool:
        if isinstance(value, list):
            if not value:
                return False
            try:
                procs = processes_from_pyspy_json(value)
            except (ValueError, TypeError, AttributeError) as exc:
                self.warnings.append(f"line {lineno}: JSON list that is not py-spy output ({exc})")
                return False
        elif isinstance(value, dict) and value.get("schema") in (STACKS_SCHEMA, NODE_STACKS_SCHEMA):
            schema = str(value["schema"])
            if schema == NODE_STACKS_SCHEMA:
                # run_on_each_ray_node.py --dump --json: stacks/v1 processes grouped by node.
                rows = [r for r in value.get("nodes") or [] if isinstance(r, dict)]
                value = {"schema": STACKS_SCHEMA, "processes": [p for r in rows for p in r.get("processes") or []]}
            try:
                procs = stacks_from_dict(value)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                self.warnings.append(f"line {lineno}: malformed {schema} document ({exc})")
                return False
            for p in procs:
                p.source = p.source or ("stacks-v1" if schema == STACKS_SCHEMA else "node-stacks-v1")
            procs = _well_formed(procs, self.warnings, lineno)
        elif isinstance(value, dict):
            self.warnings.append(f"line {lineno}: JSON object of unknown schema "
                                 f"{str(value.get('schema'))[:60]!r} skipped")
            return True
        else:
            return False
        self.processes.extend(procs)
        self.proc, self.thread, self.locals_target = None, None, None
        return True

    def json_partial(self, start: int, lineno: int) -> int:
        """Keep the complete elements of a JSON array cut short (py-spy's list of threads, or the
        `processes` of a stacks/v1 document)."""
        text = self.text
        is_doc = text[start] == "{"
        array_at = start
        if is_doc:
            if _SCHEMA_FIELD.search(text, start, start + 4096) is None:
                return start
            cached = self.processes_field  # one search serves every start before its hit
            if cached is not None and cached[0] <= start and (cached[1] is None or start < cached[1]):
                found_at = cached[1]
            else:
                found = _PROCESSES_FIELD.search(text, start)
                found_at = None if found is None else found.end()
                self.processes_field = (start, found_at)
            if found_at is None:
                return start
            array_at = found_at - 1
        if array_at in self.partial_failed:
            return start
        decoder = json.JSONDecoder()
        items: list[Any] = []
        i = array_at + 1
        n = len(text)
        while True:
            i = _JSON_GAP.match(text, i).end()  # type: ignore[union-attr]  # matches the empty string
            if i >= n or text[i] == "]":
                break
            try:
                item, i = decoder.raw_decode(text, i)
            except (ValueError, RecursionError):
                break
            items.append(item)
        if not items or not all(isinstance(it, dict) for it in items):
            self.partial_failed.add(array_at)
            return start
        value: Any = {"schema": STACKS_SCHEMA, "processes": items} if is_doc else items
        if not self.json_value(value, lineno):
            self.partial_failed.add(array_at)
            return start
        self.warnings.append(f"line {lineno}: JSON cut short: kept the {len(items)} complete "
                             f"{'process' if is_doc else 'thread'} record(s) before the cut")
        self.last_unknown = False
        return i


def _decode_at(text: str, pos: int) -> tuple[Any, int]:
    """`raw_decode(text, pos)` at a cost bounded by the value, not by `pos`: json's error
    message counts the lines from the start of its string (O(pos) per failed start), so decode
    a window from `pos`, doubled while an error may come from the window's cut."""
    decoder = json.JSONDecoder()
    n = len(text)
    size = _JSON_WINDOW
    while True:
        if pos + size >= n:
            chunk = text[pos:] if pos else text
        else:
            chunk = text[pos:pos + size]
        try:
            value, end = decoder.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            cut = pos + size < n
            if cut and (exc.pos >= len(chunk) - 1 or exc.msg.startswith("Unterminated string")):
                size *= 2
                continue
            raise _JSONFailed(exc.msg, pos + exc.pos) from None
        return value, pos + end


class _JSONFailed(ValueError):
    """A JSON value that does not decode; `at` is the offset in the whole text where it failed."""

    def __init__(self, msg: str, at: int) -> None:
        super().__init__(msg)
        self.at = at


def _well_formed(procs: list[Process], warnings: list[str], lineno: int) -> list[Process]:
    """Drop threads/frames of the wrong type from a stacks/v1 document (it may be hand-edited)."""
    out = []
    for p in procs:
        if p.pid is not None and not isinstance(p.pid, int):
            warnings.append(f"line {lineno}: process with non-integer pid {p.pid!r} skipped")
            continue
        for t in p.threads:
            t.frames = [f for f in t.frames
                        if isinstance(f.function, str) and (f.line is None or isinstance(f.line, int))]
        out.append(p)
    return out

