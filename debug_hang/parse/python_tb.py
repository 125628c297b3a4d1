"""Python's own stack printers: faulthandler and tracebacks, in every order they are written.

- faulthandler (`dump_traceback[_later]`, `register(signal)`, a fatal error):
  `Thread 0x... (most recent call first):`, `Current thread 0x...`, `  File "x.py", line N in func`
  (no comma before `in`), also pasted at column 0 or with no thread header at all;
- tracebacks: `Traceback (most recent call last):` (outermost first) and `Traceback (most recent
  call first):` (gdb's py-bt: innermost first), `  File "x.py", line N, in f` plus the source
  line, chained ones (`During handling ...`), `[Previous line repeated N more times]`, a
  RayTaskError's remote frames after `ray::Cls.method() (pid=N, ip=A)`;
- `File` lines with no header (`traceback.print_stack()`, `format_stack`, a trimmed paste) and
  under the headers of `sys._current_frames()` recipes (`recipes.py`): their order is read from
  their content (which end holds `<module>`/`_bootstrap`, which a wait), else from the dialect.
"""

from __future__ import annotations

import re

from debug_hang.model import Frame, Thread
from debug_hang.parse.frames import INNER_FIRST, OUTER_FIRST
from debug_hang.parse.state import ReaderState

FH_THREAD = re.compile(
    r"^(?P<current>Current thread|Thread) (?P<id>0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])?"
    r" \(most recent call first\):$"
)
FH_STACK = re.compile(r"^Stack \(most recent call first\):$")
FH_FRAME = re.compile(r'^ {0,8}File "(?P<file>[^"]*)", line (?P<line>\d+|\?\?\?) in (?P<func>.*)$')
FH_START = re.compile(r"^(?:Timeout \([^)]*\)!|Fatal Python error: .*)$")
FH_NOISE = re.compile(
    r"^(?:  <no Python frame>|  \.\.\.|  <truncated>|Extension modules: .*|"
    r"Python runtime state: .*|  Garbage-collecting|<Cannot show all threads while the GIL is.*)$"
)

TRACEBACK_START = "Traceback (most recent call last):"
TRACEBACK_FIRST = "Traceback (most recent call first):"
TB_FRAME = re.compile(r'^ {0,8}File:? "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<func>.+)$')
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

    def python_line(self, line: str) -> bool:
        """A faulthandler or traceback line at column 0."""
        first = line[0]
        if first == "T":
            return self.python_t_line(line)
        if first == "C":
            fh = FH_THREAD.match(line)
            if fh is not None:
                self.start_fh_thread(fh)
                return True
        elif first == "S":
            if FH_STACK.match(line):
                self.start_fh_thread(None)
                return True
        elif first == "F":
            if FH_START.match(line):
                self.new_process(None, None, "faulthandler")
                return True
            fh = FH_FRAME.match(line)
            if fh is not None:  # faulthandler's frame pasted without its indentation
                self.fh_frame(fh)
                return True
        elif first == "E" or first == "e":
            if FH_NOISE.match(line):
                return True
            named = TB_THREAD.match(line)
            if named is not None:
                self.tb_name = named.group("name")
                return True
        elif first == "D":
            if line in TB_CHAINED:
                self.tb_chained = True
                return True
        return False

    def python_t_line(self, line: str) -> bool:
        """`Traceback (...)`, faulthandler's `Thread 0x.. (most recent call first):` and
        `Timeout (0:00:06)!`, `The above exception was the direct cause ...`."""
        if line == TRACEBACK_START:
            self.start_traceback()
            return True
        if line == TRACEBACK_FIRST:  # gdb's py-bt, pasted without its gdb thread
            self.start_traceback(INNER_FIRST)
            return True
        fh = FH_THREAD.match(line)
        if fh is not None:
            self.start_fh_thread(fh)
            return True
        if FH_START.match(line):
            self.new_process(None, None, "faulthandler")
            return True
        if line in TB_CHAINED:
            self.tb_chained = True
            return True
        return False

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

    def start_traceback(self, order: str = OUTER_FIRST, name: str | None = None,
                        ident: str | None = None, source: str = "traceback") -> None:
        """A traceback (or a headerless list of frames) opens a thread; its frames are kept in
        input order until it ends, then put innermost first (`order`: how it was written; a
        `?`-suffixed order is a guess the content may overrule)."""
        self.ray_origin = None
        chained = self.tb_chained
        self.end_traceback()
        proc = self.proc
        if not chained or proc is None or proc.source != source:
            proc = self.new_process(None, None, source)
        thread = Thread(thread_id=ident, name=name or self.tb_name)
        proc.threads.append(thread)
        self.tb, self.tb_name, self.tb_chained, self.tb_repeated = thread, None, False, 0
        self.tb_flat = False
        self.tb_order = order
        self.thread, self.loose = None, False
        self.count("traceback")

    def traceback_frame(self, func: str, file: str, line: int | None, order: str = OUTER_FIRST + "?",
                        source: str = "traceback") -> None:
        if self.tb is None:  # `File` lines without the header (Ray's RayTaskError, a trimmed paste)
            origin, self.ray_origin = self.ray_origin, None
            pending = self.pending_thread
            if pending is not None:  # under a sys._current_frames() recipe's thread header
                self.start_recipe_thread(pending, order)
            else:
                self.start_traceback(order, source=source)
            if origin is not None and self.proc is not None:  # the remote frames of a RayTaskError
                self.proc.pid = int(origin.group("pid"))
                self.proc.title = f"ray::{origin.group('name')}"
                self.proc.node_ip = origin.group("ip")
        assert self.tb is not None
        frame = self.make_frame(func, file, line)
        frame.native = False  # a traceback lists Python frames only (`bin/torchrun` is Python too)
        self.tb.frames.append(frame)

    def start_recipe_thread(self, pending: tuple[str | None, str | None], order: str) -> None:
        """A thread of a `sys._current_frames()` recipe: threads of one dump share a process."""
        name, ident = pending
        self.pending_thread = None
        self.end_traceback()
        proc = self.proc
        if (proc is None or proc.source != "thread-dump"
                or (ident is not None and any(t.thread_id == ident for t in proc.threads))):
            proc = self.new_process(None, None, "thread-dump")
        thread = Thread(thread_id=ident, name=name,
                        os_thread_id=int(ident) if ident is not None and ident.isdigit() else None)
        proc.threads.append(thread)
        self.tb, self.tb_repeated, self.tb_flat, self.tb_order = thread, 0, False, order
        self.thread, self.loose = None, False
        self.count("recipe")

    def fh_frame(self, match: re.Match[str]) -> None:
        """A faulthandler frame (`File "x", line N in f`): in the thread its header opened, else
        a headerless list of them (innermost first unless the content says otherwise)."""
        lno = match.group("line")
        line = int(lno) if lno.isdigit() else None
        thread = self.thread
        if self.tb is None and thread is not None and self.proc is not None and self.proc.source == "faulthandler":
            thread.frames.append(Frame(function=match.group("func"), file=match.group("file"), line=line))
            return
        if self.tb is None or not self.tb_order.startswith(INNER_FIRST):
            if self.tb is not None:
                self.end_traceback()
            self.count("fh-headerless")
        self.traceback_frame(match.group("func"), match.group("file"), line, INNER_FIRST + "?", "faulthandler")
