"""py-spy's text layouts (0.1 to 0.4), `ray stack` around them, and run_on_each_ray_node.py --dump.

- py-spy 0.2-0.4: `Process N: title`, `Python vX (exe)`, `Thread N (idle|active|active+gil): "name"`,
  frames `    func (file:line)`, with `--native` frames, `--locals` blocks (`Arguments:`/`Locals:`;
  `Arguments::` in 0.2), `--subprocesses` sections (a dashed rule, `Parent Process N: ...`) and
  py-spy's own error output;
- py-spy 0.1 `--dump`: the exe path, `Python version X`, `Thread 0xADDR[/TID] (idle)`, tab-indented
  frames (what old `ray stack` pastes show);
- `ray stack`: `Stack dump for <ps aux line>` then py-spy text per worker;
- `run_on_each_ray_node.py --dump`: a header per node, `# sample N ...` notes, `  ! pid N: error`.
"""

from __future__ import annotations

import re

from debug_hang.model import Frame, Thread
from debug_hang.parse import pastes
from debug_hang.parse.frames import is_python_file, split_frame
from debug_hang.parse.state import ReaderState

RAY_STACK = re.compile(r"^Stack dump for (?P<ps>.*)$")
PROCESS = re.compile(r"^Process (?P<pid>\d+): ?(?P<title>.*)$")
PYTHON = re.compile(r"^Python v(?P<ver>\S+)(?: \((?P<exe>.*)\))?$")
PARENT = re.compile(r"^Parent Process (?P<pid>\d+): ?(?P<title>.*)$")
OLD_PYTHON = re.compile(r"^Python version (?P<ver>\S+)$")
THREAD = re.compile(
    r"^Thread(?: (?P<id>0[xX][0-9A-Fa-f]+|\d+)(?:/(?P<os>\d+))?)? \((?P<state>[a-z+]+)\)"
    r'(?:: "(?P<name>.*)")?$'
)
_FRAME = re.compile(r"^(?:    |\t ?)(?P<body>\S.*)$")
LOCALS_HEADER = re.compile(r"^ {8}(?P<kind>Arguments|Locals)::?$")
LOCAL = re.compile(r"^ {12}(?P<name>[^:\s][^:]*?): (?P<repr>.*)$")
PYSPY_ERROR = re.compile(r"^(?:Error: .*|Permission Denied: .*|error: .*)$")
PYSPY_ERROR_DETAIL = re.compile(r"^(?:Caused by:|Stack backtrace:|Reason: .*|\s+\d+: .*|\s+at .*)$")
SEPARATOR = re.compile(r"^-{20,}$")
# run_on_each_ray_node.py --dump text: a header per node, `# sample N ...` before each process,
# `  ! pid N: [kind] error` for a process it could not dump, a closing summary line.
_NODE_DUMP = re.compile(r"^=== (?:node (?P<node>[0-9a-f]{8,}) \(.*|\d+ node\(s\): .*)$")
_NODE_DUMP_NOTE = re.compile(r"^# (?:sample \d+\b.*|\.\.\. \d+ outer frames; see --json)$")
_NODE_DUMP_ERROR = re.compile(r"^  ! pid (?P<pid>\d+): (?P<error>.+)$")
# Distinct frame lines remembered (each line is parsed once): bounds memory on huge inputs.
_FRAME_CACHE_MAX = 200_000


class PySpyText(ReaderState):
    """Headers, threads and frames of py-spy's text output and of the tools that wrap it."""

    def pyspy_line(self, line: str) -> bool:
        """A py-spy line at column 0: process, Python version, thread, error, `ray stack` header."""
        first = line[0]
        if first == "T":
            thread = THREAD.match(line)
            if thread is not None:
                self.start_thread(thread)
                return True
        elif first == "P":
            return self.pyspy_p_line(line)
        elif first == "S":
            ray = RAY_STACK.match(line)
            if ray is not None:
                self.start_ray_stack(ray.group("ps"))
                return True
        elif first == "-":
            if SEPARATOR.match(line):  # --subprocesses: a rule between the processes
                self.thread = None
                self.rule_after = self.proc
                return True
        elif first == "E" or first == "e":
            if PYSPY_ERROR.match(line) is None:
                return False
            if self.proc is None:  # py-spy failed before printing any header: known by its details
                self.orphan_error = line.strip()
            return self.error(line)
        elif first == "/":
            # py-spy 0.1 printed the interpreter path before "Python version"
            return self.proc is None or bool(self.proc.threads) or " " not in line.strip()
        if first in "SCR" and PYSPY_ERROR_DETAIL.match(line) is not None:
            if self.orphan_error is not None:  # `Stack backtrace:` / `Caused by:`: it was py-spy's
                self.new_process(None, None, "py-spy-text").error = self.orphan_error
                self.orphan_error, self.in_error = None, True
            return self.in_error
        return False

    def pyspy_p_line(self, line: str) -> bool:
        """`Process N: title`, `Python vX (exe)`, `Parent Process N`, `Python version X`, `Permission Denied`."""
        proc = PROCESS.match(line)
        if proc is not None:
            self.start_pyspy_process(int(proc.group("pid")), proc.group("title"))
            return True
        py = PYTHON.match(line)
        if py is not None and self.proc is not None and self.proc.python is None:
            self.proc.python = py.group("ver")
            return True
        parent = PARENT.match(line)
        if parent is not None and self.proc is not None:
            self.proc.parent_pid = int(parent.group("pid"))
            self.proc.role = self.proc.role or "child"
            return True
        old = OLD_PYTHON.match(line)
        if old is not None:
            self.start_old_pyspy(old.group("ver"))
            return True
        return PYSPY_ERROR.match(line) is not None and self.error(line)

    def pyspy_indented(self, line: str, lineno: int) -> bool:
        """Under a thread: `    func (file:line)` (py-spy), `\t func (file:line)` (0.1), locals."""
        thread = self.thread
        assert thread is not None
        if (line.startswith("    ") and line[4] != " ") or line[0] == "\t":
            if self.frame(line, lineno):
                return True
        if self.locals_target is not None:
            local = LOCAL.match(line)
            if local is not None:
                self.locals_target[local.group("name")] = local.group("repr")
                return True
        if thread.frames and LOCALS_HEADER.match(line):
            frame = thread.frames[-1]
            if frame.locals is None:
                frame.locals = {}
            self.locals_target = frame.locals
            return True
        return False

    def start_ray_stack(self, ps: str) -> None:
        fields = ps.split(None, 10)
        pid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
        title = fields[10].strip() if len(fields) > 10 else None
        self.new_process(pid, title, "ray-stack")

    def start_pyspy_process(self, pid: int, title: str) -> None:
        proc = self.proc
        if (proc is not None and proc.source == "ray-stack" and proc.pid == pid
                and not proc.threads and proc.python is None and not proc.error):
            proc.title = title.strip() or proc.title  # py-spy's own header under ray stack's
        else:
            self.new_process(pid, title.strip(), "py-spy-text")

    def start_old_pyspy(self, version: str) -> None:
        proc = self.proc
        if (proc is None or proc.threads or proc.python is not None or proc.error
                or proc.source in ("faulthandler", "traceback", "frames")):
            proc = self.new_process(None, None, "py-spy-text-0.1")
        proc.python = version

    def start_thread(self, match: re.Match[str]) -> None:
        ident = match.group("id")
        proc = self.proc
        if proc is None or proc.source in ("faulthandler", "traceback") or proc.error:
            old = ident is not None and ident[:2].lower() == "0x" and match.group("name") is None
            proc = self.new_process(None, None, "py-spy-text-0.1" if old else "py-spy-text")
        if ident is None:
            self.count("no-id")
        states = match.group("state").split("+")
        os_tid = match.group("os")
        thread = Thread(
            thread_id=ident,
            os_thread_id=int(os_tid) if os_tid else (int(ident) if ident and ident.isdigit() else None),
            name=match.group("name"),
            active=True if "active" in states else (False if "idle" in states else None),
            owns_gil="gil" in states,
        )
        proc.threads.append(thread)
        self.thread, self.loose, self.pending_name = thread, False, None
        self.locals_target = None

    def error(self, line: str) -> bool:
        """py-spy's error for the process whose header came just before, or for a child after a
        --subprocesses rule (py-spy fails on a non-Python child); False if there is none."""
        proc = self.proc
        parent = self.rule_after
        if parent is not None and proc is parent and proc.threads:
            proc = self.new_process(None, None, "py-spy-text")
            proc.parent_pid, proc.role = parent.pid, "child"
        if proc is None or proc.threads or proc.error or proc.source == "faulthandler":
            return False
        proc.error = line.strip()
        self.thread = None
        self.in_error = True
        return True

    def frame(self, line: str, lineno: int) -> bool:
        """A py-spy frame line under a thread header; False if it is not one."""
        cached = self.frame_cache.get(line)
        if cached is None:
            match = _FRAME.match(line)
            func, file, lno = split_frame(match.group("body")) if match is not None else ("", "", None)
            if not file:  # "    Worker.get_objects": a line cut short, or not a frame at all
                return False
            if self.markdown:
                fixed = pastes.repair_markdown(func, file)
                if fixed != (func, file):
                    self.count("markdown")
                    func, file = fixed
            cached = (func, file, lno, not is_python_file(file))
            if len(self.frame_cache) < _FRAME_CACHE_MAX:
                self.frame_cache[line] = cached
        func, file, lno, native = cached
        assert self.thread is not None
        self.thread.frames.append(Frame(function=func, file=file, line=lno, native=native))
        self.locals_target = None
        return True


    def node_dump_line(self, line: str) -> bool:
        """The lines run_on_each_ray_node.py --dump adds around py-spy's layout: a node header
        (its id goes on the processes that follow), sample notes, a per-pid error, the summary."""
        node = _NODE_DUMP.match(line)
        if node is not None:
            self.node_id = node.group("node") or self.node_id
            self.thread = None
            return True
        if _NODE_DUMP_NOTE.match(line):
            return True
        err = _NODE_DUMP_ERROR.match(line)
        if err is not None:
            self.new_process(int(err.group("pid")), None, "node-dump").error = err.group("error")
            return True
        return False

