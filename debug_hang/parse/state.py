"""What a reader knows while it goes through an input: the processes and threads built so far,
and the bookkeeping every family of readers shares (a new process, a skipped line, a warning count).

The readers of each dump family (`pyspy_text`, `pyspy_json`, `python_tb`, `native`, ...) are
mixins over `ReaderState`; `reader.Reader` combines them and dispatches each line to one.
"""

from __future__ import annotations

import re
from typing import Any

from debug_hang.model import Frame, Process, Thread
from debug_hang.parse import pastes
from debug_hang.parse.frames import OUTER_FIRST, is_python_file, orientation

# The interpreter's eval loop in a native stack: where gdb py-bt's Python frames belong.
_EVAL_FRAME = re.compile(r"^_?PyEval_EvalFrame|^_PyEval_Vector$|^PyEval_EvalCode")


class ReaderState:
    """One pass over the lines; any line may start a new dump of any format."""

    def __init__(self, text: str, warnings: list[str]) -> None:
        self.text = text
        self.warnings = warnings
        self.processes: list[Process] = []
        self.proc: Process | None = None
        self.thread: Thread | None = None
        self.locals_target: dict[str, str] | None = None
        self.in_error = False
        self.orphan_error: str | None = None  # a py-spy error line before any process header
        self.fh_seen: set[str] = set()
        self.fh_current = False
        self.rule_after: Process | None = None  # the process a --subprocesses rule followed
        self.skipped = 0
        self.first_skipped: tuple[int, str] | None = None
        self.last_unknown = False
        self.frame_cache: dict[str, tuple[str, str, int | None, bool]] = {}
        # Pasted forms (pastes.py).
        self.markdown = pastes.MARKDOWN_SIGNS.search(text) is not None
        self.tb: Thread | None = None  # a traceback being read: frames outermost first until it ends
        self.tb_name: str | None = None  # from "Exception in thread NAME:"
        self.tb_chained = False
        self.tb_repeated = 0  # frames added back from `[Previous line repeated N more times]`
        self.tb_flat = False  # its `File` lines came unindented: so may its source lines
        self.ray_origin: re.Match[str] | None = None  # the remote call a RayTaskError names
        self.pending_name: str | None = None  # `MainThread:` alone on its line
        self.loose = False  # the current thread was opened by a bare frame, not by a header
        self.collectives: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self.fence_closed = False  # a fence came after the last dump began: chat text may follow
        # JSON: never decode again inside a span that failed; the `"processes": [` search cached.
        self.json_failed_until = -1
        self.processes_field: tuple[int, int | None] | None = None
        self.partial_failed: set[int] = set()
        self.node_id: str | None = None  # the node of a run_on_each_ray_node.py --dump section

        # Native backtraces (native.py): the frame number expected next in the thread being read,
        # the dumper of the current native process (gdb, eu, lldb), its threads by number, gdb's
        # py-bt frames being read for the current thread.
        self.native_next = -1
        self.native_kind: str | None = None
        self.native_seen: dict[int, Thread] = {}
        self.pybt: list[Frame] | None = None
        self.pybt_merge = False
        # Tracebacks: how the one being read was written (python_tb.INNER_FIRST / OUTER_FIRST,
        # with `?` when no header said it); a sys._current_frames() recipe's thread header
        # (name, id) waiting for its first frame line.
        self.tb_order = "outer-first"
        self.pending_thread: tuple[str | None, str | None] | None = None
        # A collective-mismatch message wrapped over several lines, gathered until it is whole.
        self.mismatch_lines: list[str] | None = None
        self.mismatch_lineno = 0

    def count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    # -- process / thread bookkeeping -------------------------------------------------------
    def new_process(self, pid: int | None, title: str | None, source: str) -> Process:
        self.end_traceback()
        self.end_pybt()
        proc = Process(pid=pid, title=title or None, source=source, node_id=self.node_id)
        self.processes.append(proc)
        self.proc, self.thread, self.locals_target, self.in_error = proc, None, None, False
        self.fh_seen, self.fh_current = set(), False
        self.rule_after = None
        self.loose, self.pending_name, self.fence_closed = False, None, False
        self.native_kind, self.native_seen, self.pending_thread = None, {}, None
        return proc

    def loose_process(self) -> Process:
        """The process a headerless thread belongs to: the current one if it is a text dump."""
        proc = self.proc
        if proc is None or proc.error or proc.source in ("faulthandler", "traceback"):
            name = self.pending_name
            proc = self.new_process(None, None, "frames")
            self.pending_name = name
        return proc

    def skip(self, lineno: int, line: str) -> None:
        self.skipped += 1
        if self.first_skipped is None:
            self.first_skipped = (lineno, line)
        self.last_unknown = True

    def blank(self) -> None:
        self.locals_target = None
        self.pending_name = None
        self.end_pybt()
        if self.tb is not None and self.tb_order.endswith("?"):
            self.end_traceback()  # a headerless list of frames ends at a blank line
        if self.loose:
            self.thread, self.loose = None, False

    def make_frame(self, func: str, file: str, line: int | None) -> Frame:
        if self.markdown:
            fixed = pastes.repair_markdown(func, file)
            if fixed != (func, file):
                self.count("markdown")
                func, file = fixed
        return Frame(function=func or "?", file=file, line=line,
                     native=bool(file) and not is_python_file(file))

    def end_traceback(self) -> None:
        """The traceback being read is complete: its frames go innermost first, as the model keeps
        them (a header said how they were written, else their content or the dialect does)."""
        tb = self.tb
        if tb is None:
            return
        self.tb = None
        order = self.tb_order
        if order.endswith("?"):
            order = orientation(tb.frames, order[:-1])
            if order != self.tb_order[:-1]:
                self.count("tb-reordered")
        if order == OUTER_FIRST:
            tb.frames.reverse()

    def end_pybt(self) -> None:
        """Put the gdb py-bt frames read into the thread: at its eval loop when it has native frames."""
        frames, self.pybt = self.pybt, None
        thread = self.thread
        if not frames or thread is None:
            return
        self.count("py-bt")
        native = thread.frames
        if not native:
            thread.frames = frames
            return
        at = next((i for i, f in enumerate(native) if f.native and _EVAL_FRAME.match(f.function)), len(native))
        thread.frames = native[:at] + frames + native[at:]
