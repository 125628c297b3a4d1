"""The printer: what a script writes to stdout and stderr, redacted and safe for a terminal.

`SafeStream` is installed over sys.stdout and sys.stderr by `errors.run_main`: every line a
script prints passes `untrusted.strip_controls` and `redact` there, once, and a reader that goes
away (`| head -1`) ends the output quietly. Pure standard library.
"""

from __future__ import annotations

import errno
import io
import os
import threading
from typing import TextIO

from debug_hang.redact import DEFAULT, Redactor
from debug_hang.untrusted import strip_controls

MAX_PENDING = 1 << 16  # a line longer than this without a newline is passed on in pieces


class SafeStream(io.TextIOBase):
    """A text stream that passes whole lines through strip_controls + redact to `target`.

    Installed over sys.stdout and sys.stderr by the scripts (errors.run_main): what a script
    prints is redacted there once. A partial line waits for its newline (or flush/close), so
    that a token is never split across two writes. When the reader goes away (`| head -1`: EPIPE),
    the stream is `broken`: the write that found it raises BrokenPipeError, and so does every
    later write (a loop printing forever ends); flushes do not raise, and the descriptor is pointed
    at /dev/null so that what is still buffered, other threads and the interpreter's last flush
    at exit make no noise ("Exception ignored ... BrokenPipeError").
    """

    def __init__(self, target: TextIO, redactor: Redactor = DEFAULT) -> None:
        super().__init__()
        self.target = target
        self.redactor = redactor
        self.broken = False
        self._pending = ""
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            if self.broken:
                raise BrokenPipeError(errno.EPIPE, "the reader of this stream went away")
            self._pending += text
            head, sep, tail = self._pending.rpartition("\n")
            if sep:
                self._pending = tail
                self._send(self.redactor.redact(strip_controls(head + sep)))
            elif len(self._pending) > MAX_PENDING:
                self._send(self.redactor.redact(strip_controls(self._pending)))
                self._pending = ""
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self.broken:
                return
            if self._pending:
                self._send(self.redactor.redact(strip_controls(self._pending)))
                self._pending = ""
            try:
                self.target.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _send(self, text: str) -> None:
        try:
            self.target.write(text)
        except BrokenPipeError:
            self._reader_gone()
            raise

    def _reader_gone(self) -> None:
        """The reader closed the pipe: nothing more reaches it, and nothing still buffered may
        fail again later (the target's buffer is emptied into /dev/null)."""
        self.broken = True
        self._pending = ""
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self.target.fileno())
            finally:
                os.close(devnull)
            self.target.flush()
        except (OSError, ValueError):  # no descriptor (a StringIO), or already closed
            pass

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.target, "encoding", "utf-8"))
