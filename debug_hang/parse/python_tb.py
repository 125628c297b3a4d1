"""Python's own stack printers: faulthandler and tracebacks.

- faulthandler (`dump_traceback[_later]`, `register(signal)`, a fatal error):
  `Thread 0x... (most recent call first):`, `Current thread 0x...`, `  File "x.py", line N in func`;
- tracebacks: `Traceback (most recent call last):`, `  File "x.py", line N, in f` plus the source
  line, chained ones (`During handling ...`), `[Previous line repeated N more times]`, a RayTaskError's
  remote frames after `ray::Cls.method() (pid=N, ip=A)`.
"""

from __future__ import annotations

import re

from debug_hang.model import Thread
from debug_hang.parse.state import ReaderState

FH_THREAD = re.compile(
    r"^(?P<current>Current thread|Thread) (?P<id>0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])?"
    r" \(most recent call first\):$"
)
FH_STACK = re.compile(r"^Stack \(most recent call first\):$")
FH_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line (?P<line>\d+|\?\?\?) in (?P<func>.*)$')
FH_START = re.compile(r"^(?:Timeout \([^)]*\)!|Fatal Python error: .*)$")
FH_NOISE = re.compile(
    r"^(?:  <no Python frame>|  \.\.\.|  <truncated>|Extension modules: .*|"
    r"Python runtime state: .*|  Garbage-collecting|<Cannot show all threads while the GIL is.*)$"
)

TRACEBACK_START = "Traceback (most recent call last):"
TB_FRAME = re.compile(r'^ {0,8}File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.+)$')
# The line that ends a traceback: `KeyboardInterrupt`, `RuntimeError: ...`, `ray.exceptions.X: ...`.
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]{0,200}(?:Error|Exception|Interrupt|Exit|Warning|Timeout)\b"
                            r"|^[A-Za-z_][\w.]{0,200}: ")
# Where a RayTaskError's remote frames ran: `RayTaskError(X): ray::Cls.method() (pid=N, ip=A, ...)`.
RAY_ORIGIN = re.compile(r"ray::(?P<name>[\w.<>-]{1,200})\(\) \(pid=(?P<pid>\d{1,10}), ip=(?P<ip>[0-9A-Fa-f.:]{1,64})")
TB_CHAINED = ("During handling of the above exception, another exception occurred:",
              "The above exception was the direct cause of the following exception:")
TB_THREAD = re.compile(r"^Exception in thread (?P<name>.{1,200}?):$")
TB_NOISE = re.compile(r"^\s*[\^~]+$")
TB_REPEATED = re.compile(r"^\s*\[Previous line repeated (?P<n>\d{1,9}) more times?\]$")
# Frames a `[Previous line repeated N more times]` line adds back (a RecursionError says 996).
MAX_REPEATED = 1000


class PythonTracebacks(ReaderState):
    """faulthandler's per-thread sections and Python tracebacks, as threads."""

    def start_fh_thread(self, match: re.Match[str] | None) -> None:
        ident = match.group("id") if match is not None else None
        current = match is None or match.group("current") == "Current thread"
        proc = self.proc
        if (proc is None or proc.source != "faulthandler" or (ident is not None and ident in self.fh_seen)
                or (current and self.fh_current)):
            proc = self.new_process(None, None, "faulthandler")
        if ident is not None:
            self.fh_seen.add(ident)
        self.fh_current = self.fh_current or current
        thread = Thread(thread_id=ident, name=match.group("name") if match is not None else None)
        proc.threads.append(thread)
        self.thread, self.loose = thread, False

    def start_traceback(self) -> None:
        self.ray_origin = None
        chained = self.tb_chained
        self.end_traceback()
        proc = self.proc
        if not chained or proc is None or proc.source != "traceback":
            proc = self.new_process(None, None, "traceback")
        thread = Thread(name=self.tb_name)
        proc.threads.append(thread)
        self.tb, self.tb_name, self.tb_chained, self.tb_repeated = thread, None, False, 0
        self.tb_flat = False
        self.thread, self.loose = None, False
        self.count("traceback")

    def traceback_frame(self, func: str, file: str, line: int) -> None:
        if self.tb is None:  # `File` lines without the header (Ray's RayTaskError, a trimmed paste)
            origin, self.ray_origin = self.ray_origin, None
            self.start_traceback()
            if origin is not None and self.proc is not None:  # the remote frames of a RayTaskError
                self.proc.pid = int(origin.group("pid"))
                self.proc.title = f"ray::{origin.group('name')}"
                self.proc.node_ip = origin.group("ip")
        assert self.tb is not None
        self.tb.frames.append(self.make_frame(func, file, line))

