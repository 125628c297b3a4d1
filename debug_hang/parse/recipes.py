"""Thread dumps people write with `sys._current_frames()`: a header per thread, then the
thread's stack as `traceback` prints it (outermost first, `File "f", line N, in func` and the
source line; `File: "f", ...` in the classic recipe).

Headers read (the thread's name and id, decimal or hex, are kept):
`# Thread: name(140...)`, `thread <Thread(name, started 140...)>:`, `-- Thread ID: 140... ---`,
`Thread 0x7f.. (name):`, `Thread name (140...):` at the end of a log line. A header is only taken
when frame lines follow it; the threads of one dump share a process.
"""

from __future__ import annotations

import re

from debug_hang.parse.state import ReaderState

# The word that starts a header, then what may follow it (cut at _BODY_MAX characters).
_THREAD_WORD = re.compile(r"(?:^|[\s#:\-=*<(])(?P<word>[Tt]hread|THREAD)\b")
_BODY_MAX = 300
_ID = r"(?P<id>0x[0-9a-fA-F]{1,16}|\d{3,20})"
_FORMS = (
    re.compile(r"^\s*<\w*Thread\((?P<name>[^,()]{1,200}), (?:started |initial |stopped )?(?:daemon )?"
               r"(?P<id>\d{1,20})?\)>$"),                                     # <Thread(name, started id)>
    re.compile(r"^\s*[:#]?\s*(?:[Ii][Dd]:?\s*)?" + _ID + r"(?:\s*\((?P<name>[^()]{0,200})\))?$"),  # ID: id / id (name)
    re.compile(r"^\s*[:#]?\s*(?P<name>[^()]{1,200}?)\s*[(\[]" + _ID + r"[)\]]$"),          # name(id) / name [id]
)
_TRAILER = re.compile(r"(?:\s*(?:-{2,}|={2,}|\*{2,})|:)$")


def parse_header(line: str) -> tuple[str | None, str | None] | None:
    """(thread name, thread id) from a recipe's thread header line; None if it is not one."""
    comment = line.lstrip().startswith("#")
    if not comment and not line.rstrip().endswith((":", "--", "==", "**")):
        return None
    word = _THREAD_WORD.search(line)
    if word is None:
        return None
    body = line[word.end():].rstrip()
    tail = body[-40:]
    trailer = _TRAILER.search(tail)
    if trailer is not None:
        body = body[:len(body) - len(tail) + trailer.start()]
    elif not comment:
        return None
    body = body.strip().lstrip(":").strip()[:_BODY_MAX]
    if not body:
        return None
    for form in _FORMS:
        match = form.match(body)
        if match is not None:
            name = (match.group("name") or "").strip() or None
            ident = match.group("id")
            if ident is None and name is None:
                return None
            return name, ident
    return None


class ThreadDumpRecipes(ReaderState):
    """A recipe's thread header: remembered until the frame lines under it open the thread."""

    def recipe_header(self, line: str) -> bool:
        header = parse_header(line)
        if header is None:
            return False
        self.end_traceback()
        self.pending_thread = header
        self.thread, self.loose = None, False
        return True
