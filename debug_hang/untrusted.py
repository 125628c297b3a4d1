"""Untrusted text (names, titles, log lines, source from the cluster) made harmless: terminal
control characters removed, Markdown neutralised so that it can never add structure (a heading,
a fence, a link, HTML), HTML and SVG escaped so that it can add no element, script or
attribute. Linear regex scans with bounded repetitions; pure standard library (the node probe
may import it). Secrets are redact.py's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# --- control characters -------------------------------------------------------------------------

# ESC sequences: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte escapes; the C1
# forms (\x9b CSI, \x9d OSC) too. OSC bodies are bounded so that an unterminated one stays linear.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]{0,64}[ -/]{0,16}[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x9d\x90\x98\x9e\x9f])[^\x07\x1b\x9c]{0,4096}(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[@-Z\\-_ -/]?"
)
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_CONTROLS_ONE_LINE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def strip_controls(text: str, newlines: bool = True) -> str:
    """Remove terminal escape sequences and control characters (tab kept; newlines kept when
    `newlines`, else each becomes a space; CR dropped). Linear."""
    if not text or text.isprintable():  # no control character at all: the common case
        return text
    if _CONTROLS.search(text) is None:  # only newlines (and tabs): a charset scan, fast
        return text if newlines else text.replace("\r", "").replace("\n", " ")
    text = _ESCAPES.sub("", text.replace("\r\n", "\n"))
    if not newlines:
        text = text.replace("\n", " ")
    return (_CONTROLS if newlines else _CONTROLS_ONE_LINE).sub("", text)


# --- Markdown -----------------------------------------------------------------------------------

_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#~!"})


def one_line(text: object, limit: int = 60) -> str:
    """A command line or title as a short one-line name: control characters dropped, every run of
    whitespace (a `python -c` script's newlines) one space, cut to `limit` characters with "…"."""
    flat = " ".join(strip_controls(str(text or "")).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def md_cell(text: object, limit: int | None = None) -> str:
    """Untrusted text as one Markdown table cell (or list item): one line, every character that
    could start emphasis, code, a link, an image, HTML or a new column escaped."""
    flat = strip_controls(str(text), newlines=False)
    if limit is not None and len(flat) > limit:
        flat = flat[:limit] + "…"
    return flat.translate(_MD_SPECIAL)


def md_inline(text: object, limit: int | None = None) -> str:
    """Text the tool composed around untrusted parts (evidence sentences with `code`): one line,
    no HTML, no link or image, no new column; its own backtick spans kept."""
    flat = strip_controls(str(text), newlines=False)
    if limit is not None and len(flat) > limit:
        flat = flat[:limit] + "…"
    flat = flat.translate(_MD_INLINE)
    if flat.count("`") % 2:
        flat = flat.replace("`", "'")  # an unbalanced backtick would swallow what follows
    return flat


_MD_INLINE = str.maketrans({c: "\\" + c for c in "\\[]<>|!"})
_BACKTICKS = re.compile("`+")


def longest_backtick_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code_span(text: object, limit: int | None = None) -> str:
    """Untrusted text as inline code: delimited by more backticks than any run inside it."""
    flat = strip_controls(str(text), newlines=False)
    if limit is not None and len(flat) > limit:
        flat = flat[:limit] + "…"
    ticks = "`" * (longest_backtick_run(flat) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}".replace("|", "\\|")


def fence(lines: Iterable[str], info: str = "text job-output", indent: str = "") -> list[str]:
    """Untrusted lines as a fenced block labelled `info` (`job-output`: printed by the job, not
    by this tool), with a fence longer than any backtick run inside so that nothing closes it."""
    body = [strip_controls(str(line), newlines=False) for line in lines]
    ticks = "`" * max(3, max((longest_backtick_run(b) for b in body), default=0) + 1)
    return [f"{indent}{ticks}{info}", *(f"{indent}{b}" for b in body), f"{indent}{ticks}"]


# --- HTML and SVG -------------------------------------------------------------------------------

# Characters XML 1.0 forbids (lone surrogates, the two noncharacters) and the rest of the C0/C1
# controls strip_controls leaves (tab and newline are kept where allowed).
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")
_HTML_SPECIAL = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"})


def html_text(text: object, limit: int | None = None, newlines: bool = False) -> str:
    """Untrusted text as HTML or SVG character data: controls removed, every character that could
    open a tag, an entity or close an attribute escaped (`& < > " '`), so that it can never add an
    element, a script or an attribute. One line unless `newlines` (inside <pre>)."""
    flat = _NOT_XML.sub("", strip_controls(str(text), newlines=newlines))
    if limit is not None and len(flat) > limit:
        flat = flat[:limit] + "…"
    return flat.translate(_HTML_SPECIAL)


def html_attr(text: object, limit: int | None = None) -> str:
    """Untrusted text as the value of a double-quoted HTML/SVG attribute (a title, a data-
    attribute): one line, quotes of both kinds escaped. Never for href, src, style or on*
    attributes: those are never built from the job's text."""
    return html_text(text, limit, newlines=False)
