"""The dispatcher: one pass over an input's lines, each line given to the reader of the form it
starts or continues, so dumps of every family can follow each other (or interleave, once split
by `streams`) in one input.

Forms are detected per line from their first characters, then by each family's own patterns:
py-spy text (`pyspy_text`), JSON values (`pyspy_json`), faulthandler and tracebacks
(`python_tb`), and, when nothing else claims a line, the pasted forms (`pastes`: bare frames,
arrow chains, names alone on a line). A line no reader claims is skipped and counted. Every
reader is linear in its input: lines are cut at `MAX_LINE` before any regex, and no pattern
backtracks over a whitespace run.
"""

from __future__ import annotations

import re
from dataclasses import replace

from debug_hang.model import Process, Thread
from debug_hang.parse import pastes
from debug_hang.parse import pyspy_text as spy
from debug_hang.parse import python_tb as ptb
from debug_hang.parse.collective_text import MARKERS, CollectiveMessages
from debug_hang.parse.frames import INNER_FIRST, python_from_paths
from debug_hang.parse.native import NativeStacks, pybt_native_frame
from debug_hang.parse.pastes import MAX_LINE
from debug_hang.parse.pyspy_json import JsonDumps
from debug_hang.parse.pyspy_text import PySpyText
from debug_hang.parse.python_tb import PythonTracebacks
from debug_hang.parse.recipes import ThreadDumpRecipes

# Lines that begin a dump: they end a traceback instead of being read as its exception line.
_HEADERS = ("Traceback", "Process ", "Thread ", "Thread(", "Stack ", "Current thread", "```", "~~~",
            "Fatal Python", "Timeout (", "During handling", "The above exception",
            "Exception in thread", "Python v", "Parent Process")
_SPACE = re.compile(r"\s")
# First characters of native dumpers' lines (gdb's frames and prompts, lldb's threads, notices).
_NATIVE_FIRST = frozenset("#(*[AP")


class Reader(NativeStacks, PySpyText, JsonDumps, PythonTracebacks, ThreadDumpRecipes, CollectiveMessages):
    """Reads one text: `run()` returns its processes; `collectives` the per-rank facts it found."""

    def run(self) -> list[Process]:
        text = self.text
        n = len(text)
        pos = 0
        lineno = 0
        while pos < n:
            end = text.find("\n", pos)
            nxt = n if end < 0 else end + 1
            lineno += 1
            if text[pos] in "[{" and pos >= self.json_failed_until:
                after = self.json_at(pos, lineno)
                if after > pos:
                    lineno += text.count("\n", pos, after)
                    nl = text.find("\n", after)
                    rest_end = n if nl < 0 else nl
                    if text[after:rest_end].strip():
                        pos = after  # more text on the line the JSON value ended on
                        lineno -= 1
                    else:
                        pos = n if nl < 0 else nl + 1
                    continue
            stop = n if end < 0 else end
            if stop - pos > MAX_LINE:
                self.count("cut")
                stop = pos + MAX_LINE
            self.line(text[pos:stop].rstrip(), lineno)
            pos = nxt
        self.finish()
        return [p for p in self.processes
                if p.threads or p.error or p.pid is not None or p.collective]

    def finish(self) -> None:
        self.end_traceback()
        self.end_pybt()
        self.end_mismatch()
        if self.skipped:
            assert self.first_skipped is not None
            ln, sample = self.first_skipped
            self.warnings.append(f"{self.skipped} line(s) not recognised and skipped "
                                 f"(first at line {ln}: {sample[:80]!r})")
        if self.last_unknown and self.processes and not self.fence_closed:
            self.warnings.append("the input ends with an unrecognised line: the last dump may be "
                                 "cut short; parsed as far as it goes")
        elif self.processes and not self.processes[-1].threads and not self.processes[-1].error \
                and self.processes[-1].pid is not None:
            self.warnings.append(f"process {self.processes[-1].pid} has a header but no thread: "
                                 "the dump was cut short")
        for proc in self.processes:
            if proc.python is None and proc.source in ("faulthandler", "traceback"):
                proc.python = python_from_paths(proc)
        self.warn_assumptions()

    def warn_assumptions(self) -> None:
        c = self.counts.get
        if c("cut"):
            self.warnings.append(f"{c('cut')} line(s) longer than {MAX_LINE} characters: read their "
                                 f"first {MAX_LINE} only")
        if c("loose"):
            self.warnings.append(f"{c('loose')} thread(s) read from frame lines without a thread "
                                 "header: process and thread ids unknown")
        if c("no-id"):
            self.warnings.append(f"{c('no-id')} thread header(s) without a thread id: the threads "
                                 "are told apart by name only")
        if c("arrows"):
            order = (f"{c('arrows-reversed')} of them written caller first (they start at an entry "
                     "point or end in a wait) and reversed" if c("arrows-reversed") else
                     "all read innermost first, as dumps print them")
            self.warnings.append(f"{c('arrows')} arrow chain(s) (`a -> b`) read as threads of "
                                 f"function names only, no files or lines; {order}")
        if c("elided"):
            self.warnings.append(f"{c('elided')} `...` line(s): frames left out of the paste there")
        if c("traceback"):
            self.warnings.append(f"{c('traceback')} Python traceback(s) read as threads, innermost "
                                 "frame first (where the thread was when the exception was raised)")
        if self.markdown and c("markdown"):
            self.warnings.append(f"the paste looks rendered as Markdown: {c('markdown')} frame(s) "
                                 "repaired (`init.py` -> `__init__.py`, `X..y` -> `X.<locals>.y`, "
                                 "a lost `<module>` name -> `?`)")


    def line(self, line: str, lineno: int) -> None:
        """Give one line to the reader of the form it starts or continues."""
        self.last_unknown = False
        if line[:1] == ">" and not line.startswith(">>>"):  # a Markdown quote (`> ` per level)
            line = pastes.QUOTE.sub("", line, count=1)
        if not line:
            self.blank()
            return
        first = line[0]
        if (first == " " and self.thread is not None and line[4:5] not in (" ", "\t", "") and line[:4] == "    "
                and self.tb is None and self.pybt is None and self.native_kind is None
                and self.mismatch_lines is None and self.frame(line, lineno)):
            return  # the common case, a py-spy frame under its thread: nothing else to try
        if self.message_line(line, lineno):
            return
        if first == " " or first == "\t":
            if not (line.startswith("  ! pid ") and self.node_dump_line(line)):
                self.indented(line, lineno)
            return
        if (first == "=" or first == "#") and self.node_dump_line(line):
            return
        if self.tb is not None and self.traceback_goes_on(line):
            return
        self.locals_target = None
        if (first == "`" or first == "~") and line.startswith(("```", "~~~")):
            self.fence(line, lineno)
            return
        if self.headers(first, line) or self.recipe_header(line) or self.pasted(line, line, lineno):
            return
        self.skip(lineno, line)

    def headers(self, first: str, line: str) -> bool:
        """The line's family by its first character: py-spy's headers (the most common) first; the
        native dumpers' where their lines start (`#N`, `(gdb)`, `* thread`, `[Inferior`, `PID`),
        and gdb's `Traceback (most recent call first)` inside a gdb thread before Python's."""
        if first == "T":
            return self.pyspy_line(line) or self.native_line(line) or self.python_line(line)
        if first in _NATIVE_FIRST:
            return self.native_line(line) or self.pyspy_line(line) or self.python_line(line)
        return self.pyspy_line(line) or self.python_line(line) or self.native_line(line)

    def message_line(self, line: str, lineno: int) -> bool:
        """Facts written in messages (a collective mismatch; where a RayTaskError ran): read
        wherever they are; True when the line is only that message."""
        if self.mismatch_lines is not None:
            if self.mismatch_continues(line, lineno):
                return True
        if "Detected mismatch between collectives" in line:
            if self.mismatch_starts(line, lineno) and self.tb is None:
                return True
        elif MARKERS.search(line) is not None and self.progress_line(line, lineno) and self.tb is None:
            return True
        if "(pid=" in line and "ray::" in line:
            origin = ptb.RAY_ORIGIN.search(line)
            if origin is not None:
                self.ray_origin = origin
        return False

    def traceback_goes_on(self, line: str) -> bool:
        """A line at column 0 while a traceback is open: its frame (pasted without indentation),
        its source line, or the exception line that ends it (consumed)."""
        assert self.tb is not None
        tb = ptb.TB_FRAME.match(line)
        if tb is not None:  # a traceback pasted without its indentation
            self.traceback_frame(tb.group("func"), tb.group("file"), int(tb.group("line")))
            self.tb_flat = True
            return True
        fh = ptb.FH_FRAME.match(line)
        if fh is not None:
            self.fh_frame(fh)
            return True
        if (self.tb_flat and self.tb.frames and self.tb.frames[-1].code is None
                and not line.startswith(_HEADERS) and not ptb.EXCEPTION_LINE.match(line)):
            self.tb.frames[-1].code = line.strip()[:300]
            return True
        ends_exception = self.proc is not None and self.proc.source == "traceback" \
            and (not self.tb_order.endswith("?") or ptb.EXCEPTION_LINE.match(line) is not None)
        self.end_traceback()
        return ends_exception and not line.startswith(_HEADERS)  # the exception line ending it

    def indented(self, line: str, lineno: int) -> None:
        """An indented line: a frame, a source line, locals, a native dumper's line."""
        if (self.native_kind is not None or self.pybt is not None) and self.native_line(line):
            return
        if self.tb is not None and self.traceback_detail(line):
            return
        if "File" in line[:14]:
            tb = ptb.TB_FRAME.match(line)
            if tb is not None:
                self.traceback_frame(tb.group("func"), tb.group("file"), int(tb.group("line")))
                return
            fh = ptb.FH_FRAME.match(line)
            if fh is not None:
                self.fh_frame(fh)
                return
        if self.thread is not None and self.pyspy_indented(line, lineno):
            return
        if line[:9] == "  thread " and self.native_line(line):  # lldb's threads after the first
            return
        if self.in_error and spy.PYSPY_ERROR_DETAIL.match(line):
            return
        if ptb.FH_NOISE.match(line) or ptb.TB_NOISE.match(line):
            return
        if self.pasted(line.strip(), line, lineno):
            return
        self.skip(lineno, line)

    def traceback_detail(self, line: str) -> bool:
        """Inside a traceback: a folded recursion, the frame's source line, `^^^` markers, and in
        py-bt's innermost-first form the C code under Python (`Waiting for the GIL`)."""
        assert self.tb is not None
        if self.tb_order == INNER_FIRST:
            special = pybt_native_frame(line)
            if special is not None:
                self.tb.frames.append(special)
                return True
        repeated = ptb.TB_REPEATED.match(line)
        if repeated is not None:  # Python folds recursion: the frame above, N more times
            if self.tb.frames:
                extra = min(int(repeated.group("n")), ptb.MAX_REPEATED - self.tb_repeated)
                self.tb_repeated += max(extra, 0)
                self.tb.frames.extend(replace(self.tb.frames[-1]) for _ in range(extra))
            return True
        if self.tb.frames and self.tb.frames[-1].code is None and line.startswith(("    ", "  ")) \
                and not line.lstrip().startswith("File"):
            if line.startswith("    ") or self.proc is None or self.proc.source != "traceback" \
                    or self.tb_order.endswith("?"):
                if not ptb.TB_NOISE.match(line):
                    self.tb.frames[-1].code = line.strip()[:300]  # the frame's source line
                return True
        return ptb.TB_NOISE.match(line) is not None

    def pasted(self, body: str, line: str, lineno: int) -> bool:
        """A bare frame, a `...` elision, an arrow chain or a thread name alone on its line."""
        if pastes.ELISION.match(body):
            self.count("elided")
            return True
        if body.startswith("File"):
            tb = ptb.TB_FRAME.match(body)
            if tb is not None:
                self.traceback_frame(tb.group("func"), tb.group("file"), int(tb.group("line")))
                self.tb_flat = line is body
                return True
        loose = pastes.loose_frame(body)
        if loose is not None and (self.thread is not None or not _SPACE.search(loose[0])):
            self.add_loose_frame(*loose)  # a new thread opens only on a function-like name (no spaces)
            return True
        chain = pastes.arrow_chain(body)
        if chain is not None:
            name, items, reversed_ = chain
            proc = self.loose_process()
            thread = Thread(name=name or self.pending_name)
            thread.frames = [self.make_frame(f, file, lno) for f, file, lno in items]
            proc.threads.append(thread)
            self.thread, self.loose, self.pending_name = None, False, None
            self.count("arrows")
            if reversed_:
                self.count("arrows-reversed")
            return True
        if line is body or not line.startswith("    "):
            named = pastes.NAME_HEADER.match(body)
            if named is not None:
                self.thread, self.loose = None, False
                self.pending_name = named.group("name")
                return True
        return False


    def add_loose_frame(self, func: str, file: str, line: int | None) -> None:
        thread = self.thread
        if thread is None:
            proc = self.loose_process()
            thread = Thread(name=self.pending_name)
            proc.threads.append(thread)
            self.thread, self.loose, self.pending_name = thread, True, None
            self.count("loose")
        thread.frames.append(self.make_frame(func, file, line))

    def fence(self, line: str, lineno: int) -> None:
        """A Markdown fence ends the thread being read; a header may follow on its line."""
        self.thread, self.loose, self.pending_name = None, False, None
        self.fence_closed = self.proc is not None
        rest = line.lstrip("`~").strip()
        if rest.startswith(_HEADERS):
            self.line(rest, lineno)

