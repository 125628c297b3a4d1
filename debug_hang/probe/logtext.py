"""Which bytes of a log are text, decided before a line of it is counted or quoted (stdlib only).

A log the tool reads (a Ray worker's .out/.err, a driver's log) can hold bytes that are no text:
a child that inherited the worker's stdout and wrote a compressed file or a pickle into it. A
line is text when it is valid UTF-8 and printable once terminal escape sequences are set aside
(tab, carriage return and form feed allowed; no other C0 or C1 control, no U+FFFD). A stream
that is mostly not text is not text at all: the printable fragments between its binary runs are
noise, not lines. `text_lines` returns the lines that are text and the count of bytes that were
not; nothing here redacts or cuts (the caller does, then quotes).
"""

from __future__ import annotations

import codecs
import re

# CSI (colours, cursor moves), OSC (titles, links: bounded) and two-byte escapes.
_ESCAPES = re.compile(r"\x1b\[[0-?]{0,32}[ -/]{0,4}[@-~]|\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_NOT_PRINTABLE = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\ufffd]")
# Above this share of bytes that are not text, a chunk is binary data: none of it is a line.
MAX_NOT_TEXT_SHARE = 0.5


def is_text(line: str) -> bool:
    """A decoded line is printable: no control character but tab, CR and form feed outside
    terminal escape sequences, and no U+FFFD (a decoder's mark for bytes that were not text)."""
    return not _NOT_PRINTABLE.search(_ESCAPES.sub("", line))


def _decode(raw: bytes, final: bool) -> str | None:
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(raw, final=final)
    except UnicodeDecodeError:
        return None


def text_lines(data: bytes, cut: bool = False) -> tuple[list[str], int]:
    """(the non-empty text lines of `data`, how many of its bytes are not text).

    `cut`: `data` stops where a read stopped, possibly inside a character (its incomplete last
    character is then not held against it). A newline byte never occurs inside a UTF-8
    character, so each line decodes on its own."""
    pieces = data.split(b"\n")
    lines: list[str] = []
    not_text = 0
    for i, raw in enumerate(pieces):
        text = _decode(raw, final=not (cut and i == len(pieces) - 1))
        if text is None or not is_text(text):
            not_text += len(raw) + (i < len(pieces) - 1)
            continue
        lines += [ln for ln in text.splitlines() if ln.strip()]
    if data and not_text > MAX_NOT_TEXT_SHARE * len(data):
        return [], len(data)
    return lines, not_text


def clean_log_text(text: str) -> str:
    """A log already decoded with replacement (the dashboard's answer): each run of lines that are
    not text becomes one `[N line(s) not text]` line, so that nothing of them is kept or quoted."""
    lines = text.splitlines()
    flags = [is_text(line) for line in lines]
    # A printable fragment between two runs that are not text belongs to them (random bytes
    # hold short printable stretches).
    flags = [ok and not (0 < i < len(lines) - 1 and not flags[i - 1] and not flags[i + 1])
             for i, ok in enumerate(flags)]
    out: list[str] = []
    run = 0
    for line, ok in zip(lines, flags, strict=True):
        if ok:
            if run:
                out.append(f"[{run} line(s) not text]")
                run = 0
            out.append(line)
        else:
            run += 1
    if run:
        out.append(f"[{run} line(s) not text]")
    return "\n".join(out) + ("\n" if text.endswith("\n") and out else "")


TRACEBACK_HEADER = "Traceback (most recent call last):"
MAX_EXCEPTIONS = 3  # the most repeated exception lines kept per log window


def repeated_exceptions(lines: list[str]) -> list[dict[str, object]]:
    """The exception lines that end Python tracebacks in `lines`, most repeated first, each with
    how many tracebacks it ended (`count`); only those that ended two or more. A traceback's
    exception line is the first line after its header that is not indented (the frames and the
    `^^^` markers are). A log that repeats one traceback many times in a short window is a
    process (or its children) failing the same way again and again."""
    counts: dict[str, int] = {}
    inside = False
    for line in lines:
        if line.startswith(TRACEBACK_HEADER):
            inside = True
        elif inside and line[:1] not in (" ", "\t"):
            counts[line] = counts.get(line, 0) + 1
            inside = False
    ranked = sorted(counts.items(), key=lambda kv: -kv[1])
    return [{"line": line, "count": n} for line, n in ranked[:MAX_EXCEPTIONS] if n >= 2]
