"""Read every stack format responders paste into one model: `Process` → `Thread` → `Frame`.

Formats (auto-detected, and mixed freely in one input, back to back):

- `py-spy-text`: `py-spy dump` text, current layout (`Process N: title`, `Python vX (exe)`,
  `Thread N (idle|active|active+gil): "name"`, frames `func (file:line)`), with `--native` frames,
  `--locals` blocks (`Arguments:`/`Locals:`; `Arguments::` in py-spy 0.2), `--subprocesses`
  sections (a dashed rule, `Parent Process N: ...`), and py-spy's own error output.
- `py-spy-text-0.1`: py-spy 0.1's `--dump` layout (exe path, `Python version X`,
  `Thread 0xADDR[/TID] (idle)`, tab-indented frames) — what old `ray stack` pastes show.
- `py-spy-json`: `py-spy dump --json` (a list of threads), read by `pyspy.processes_from_pyspy_json`.
- `ray-stack`: `ray stack` output: `Stack dump for <ps aux line>` then py-spy text per worker.
- `faulthandler`: Python's `faulthandler` (`Thread 0x... (most recent call first):`,
  `Current thread 0x...`, `  File "x.py", line N in func`), from `dump_traceback[_later]`,
  `register(signal)` or a fatal error.
- `stacks-v1`: a `debug-hang/stacks/v1` JSON document (`model.stacks_from_dict`).

Frames are innermost first, as every one of these dumpers prints them. Unknown lines between dumps
(shell prompts, log lines, Markdown fences) are skipped; input with no dump at all, binary or empty
input raises `BadInputError`. A dump cut short is parsed as far as it goes, with a warning.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from debug_hang.errors import BadInputError
from debug_hang.model import STACKS_SCHEMA, Frame, Process, Thread, stacks_from_dict
from debug_hang.probe.pyspy import processes_from_pyspy_json

FORMATS = ("py-spy-text", "py-spy-text-0.1", "py-spy-json", "ray-stack", "faulthandler",
           "stacks-v1")
FORMATS_HELP = """input formats (auto-detected; several may follow each other in one file):
  py-spy-text      py-spy dump (0.2 to 0.4 layouts), with --native, --locals, --subprocesses
  py-spy-text-0.1  py-spy 0.1 `--dump` (Thread 0xADDR (idle), tab-indented frames)
  py-spy-json      py-spy dump --json
  ray-stack        `ray stack` ("Stack dump for <ps line>" + py-spy text per worker)
  faulthandler     Python faulthandler (dump_traceback, dump_traceback_later, register, crash)
  stacks-v1        debug-hang/stacks/v1 JSON (what parse_stacks.py and diagnose write)
  DIR              every file inside; a diagnose folder's stacks.json is used alone"""

# A directory holding this file is a diagnose collection folder: the file is authoritative.
COLLECTION_STACKS_FILE = "stacks.json"
# A folder member larger than this is not read (a core file beside the dumps, say): 1 GiB is
# far above the ~2 KB a process's dump takes, so 100k processes in one file still fit.
MAX_DIR_FILE_BYTES = 1 << 30
# Bytes examined to tell text from binary; 64 KiB covers many dumps and costs nothing.
_SNIFF_BYTES = 65536
# Share of control / undecodable characters above which input is binary, not a damaged text.
_BINARY_RATIO = 0.10

_NO_DUMP = ("no stack dump recognised in the input (expected py-spy text or JSON, `ray stack`, "
            "faulthandler or debug-hang/stacks/v1 JSON; see --help for the formats)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_RAY_STACK = re.compile(r"^Stack dump for (?P<ps>.*?)\s*$")
_PROCESS = re.compile(r"^Process (?P<pid>\d+): ?(?P<title>.*?)\s*$")
_PYTHON = re.compile(r"^Python v(?P<ver>\S+)(?: \((?P<exe>.*)\))?\s*$")
_PARENT = re.compile(r"^Parent Process (?P<pid>\d+): ?(?P<title>.*?)\s*$")
_OLD_PYTHON = re.compile(r"^Python version (?P<ver>\S+)\s*$")
_THREAD = re.compile(
    r"^Thread (?P<id>0[xX][0-9A-Fa-f]+|\d+)(?:/(?P<os>\d+))? \((?P<state>[a-z+]+)\)"
    r'(?:: "(?P<name>.*)")?\s*$'
)
_FRAME = re.compile(r"^(?:    |\t ?)(?P<body>\S.*?)\s*$")
_FRAME_BODY = re.compile(r"^(?P<func>.*?) \((?P<loc>[^()]*)\)$")
_LOCALS_HEADER = re.compile(r"^ {8}(?P<kind>Arguments|Locals)::?\s*$")
_LOCAL = re.compile(r"^ {12}(?P<name>[^:\s][^:]*?): (?P<repr>.*)$")
_FH_THREAD = re.compile(
    r"^(?P<current>Current thread|Thread) (?P<id>0x[0-9a-fA-F]+)(?: \[(?P<name>[^\]]*)\])?"
    r" \(most recent call first\):\s*$"
)
_FH_STACK = re.compile(r"^Stack \(most recent call first\):\s*$")
_FH_FRAME = re.compile(r'^  File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<func>.*?)\s*$')
_FH_START = re.compile(r"^(?:Timeout \([^)]*\)!|Fatal Python error: .*)\s*$")
_FH_NOISE = re.compile(
    r"^(?:  <no Python frame>|  \.\.\.|  <truncated>|Extension modules: .*|"
    r"Python runtime state: .*|  Garbage-collecting|<Cannot show all threads while the GIL is.*)\s*$"
)
_PYSPY_ERROR = re.compile(r"^(?:Error: .*|Permission Denied: .*|error: .*)$")
_PYSPY_ERROR_DETAIL = re.compile(r"^(?:Caused by:|Stack backtrace:|Reason: .*|\s+\d+: .*|\s+at .*)$")
_SEPARATOR = re.compile(r"^-{20,}\s*$")
# run_on_each_ray_node.py --dump text: a header per node, `# sample N ...` before each process,
# `  ! pid N: [kind] error` for a process it could not dump, a closing summary line.
_NODE_DUMP = re.compile(r"^=== (?:node (?P<node>[0-9a-f]{8,}) \(.*|\d+ node\(s\): .*)$")
_NODE_DUMP_NOTE = re.compile(r"^# (?:sample \d+\b.*|\.\.\. \d+ outer frames; see --json)$")
_NODE_DUMP_ERROR = re.compile(r"^  ! pid (?P<pid>\d+): (?P<error>.+)$")
_PY_SUFFIXES = (".py", ".pyx", ".pyw", ".pyi")
_STDLIB_VERSION = re.compile(r"/lib/python(\d+\.\d+)/")
NODE_STACKS_SCHEMA = "debug-hang/node-stacks/v1"  # run_on_each_ray_node.py --dump --json
_SCHEMA_FIELD = re.compile(r'"schema"\s*:\s*"' + re.escape(STACKS_SCHEMA) + '"')
_PROCESSES_FIELD = re.compile(r'"processes"\s*:\s*\[')
# Distinct frame lines remembered (each line is parsed once): bounds memory on huge inputs.
_FRAME_CACHE_MAX = 200_000


def parse_text(text: str, warnings: list[str] | None = None) -> list[Process]:
    """Parse every dump in `text` (any mix of the supported formats) into processes.

    Raises BadInputError when `text` is empty or holds no recognisable dump. `warnings`, when
    given, receives one line per recoverable problem (a dump cut short, skipped lines).
    """
    sink: list[str] = [] if warnings is None else warnings
    if not text.strip():
        raise BadInputError("the input is empty: paste or point to a stack dump")
    if "\x1b[" in text:
        text = _ANSI.sub("", text)
    with paused_gc():
        processes = _Parser(text, sink).run()
    if not processes:
        raise BadInputError(_NO_DUMP)
    return processes


def parse_bytes(data: bytes, name: str = "input", warnings: list[str] | None = None) -> list[Process]:
    """Decode `data` (UTF-8, UTF-16 with BOM, or damaged UTF-8) and parse it with `parse_text`."""
    sink: list[str] = [] if warnings is None else warnings
    text = decode_input(data, name, sink)
    local: list[str] = []
    try:
        return parse_text(text, local)
    except BadInputError as exc:
        raise BadInputError(f"{name}: {exc}") from None
    finally:
        sink.extend(f"{name}: {w}" for w in local)


def decode_input(data: bytes, name: str, warnings: list[str]) -> str:
    """Text from bytes; raises BadInputError for empty or binary input."""
    if not data.strip():
        raise BadInputError(f"{name}: the input is empty: paste or point to a stack dump")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # PowerShell's `>` writes UTF-16 with a BOM
        text = data.decode("utf-16", errors="replace")
    else:
        head = data[:_SNIFF_BYTES]
        if b"\x00" in head:
            raise BadInputError(f"{name}: binary data, not a stack dump (NUL bytes found)")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            text = data.decode("utf-8-sig", errors="replace")
            warnings.append(f"{name}: not valid UTF-8 (first bad byte at offset {exc.start}); "
                            "undecodable bytes shown as U+FFFD")
    sample = text[:_SNIFF_BYTES]
    bad = sum(1 for ch in sample if ch == "\ufffd" or (ch < " " and ch not in "\t\r\n\x1b\f"))
    if sample and bad / len(sample) > _BINARY_RATIO:
        raise BadInputError(f"{name}: binary data, not a stack dump "
                            f"({bad} of the first {len(sample)} characters are not text)")
    return text


def parse_path(path: str, warnings: list[str] | None = None) -> list[Process]:
    """Parse a FILE, every file of a DIR (its stacks.json alone when it holds one), or `-` (stdin)."""
    sink: list[str] = [] if warnings is None else warnings
    if path == "-":
        if sys.stdin is None:
            raise BadInputError("stdin: there is no standard input to read")
        return parse_bytes(sys.stdin.buffer.read(), "stdin", sink)
    if os.path.isdir(path):
        return _parse_dir(path, sink)
    return parse_bytes(_read(path), path, sink)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise BadInputError(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise BadInputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _parse_dir(path: str, warnings: list[str]) -> list[Process]:
    collected = os.path.join(path, COLLECTION_STACKS_FILE)
    if os.path.isfile(collected):
        data = _read(collected)
        if STACKS_SCHEMA.encode() in data[:_SNIFF_BYTES]:
            others = sum(len(files) for _, _, files in os.walk(path)) - 1
            if others:
                warnings.append(f"{path}: read {COLLECTION_STACKS_FILE} (the collector's result) "
                                f"and ignored the {others} other file(s) beside it")
            return parse_bytes(data, collected, warnings)
    processes: list[Process] = []
    files = 0
    for root, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for fname in sorted(names):
            if fname.startswith("."):
                continue
            files += 1
            full = os.path.join(root, fname)
            try:
                if os.path.getsize(full) > MAX_DIR_FILE_BYTES:
                    warnings.append(f"skipped {full}: larger than {MAX_DIR_FILE_BYTES >> 20} MiB "
                                    "(a core file?); pass it alone to read it")
                    continue
                processes.extend(parse_bytes(_read(full), full, warnings))
            except BadInputError as exc:
                warnings.append(f"skipped {exc}".replace(_NO_DUMP, "no stack dump in it"))
            except OSError as exc:
                warnings.append(f"skipped {full}: {exc.strerror or exc}")
    if not processes:
        raise BadInputError(f"{path}: no stack dump found in the {files} file(s) of this directory")
    renumber_samples(processes)
    return processes


def renumber_samples(processes: list[Process]) -> None:
    """Number the dumps of each pid 0, 1, ... in input order (several files may hold one pid),
    and give the dumps that lack them (py-spy JSON) the title and Python version another dump
    of the same pid told."""
    counts: dict[int, int] = {}
    titles: dict[int, str] = {}
    pythons: dict[int, str] = {}
    for proc in processes:
        if proc.pid is not None:
            proc.sample = counts.get(proc.pid, 0)
            counts[proc.pid] = proc.sample + 1
            if proc.title:
                titles.setdefault(proc.pid, proc.title)
            if proc.python:
                pythons.setdefault(proc.pid, proc.python)
    for proc in processes:
        if proc.pid is not None:
            proc.title = proc.title or titles.get(proc.pid)
            proc.python = proc.python or pythons.get(proc.pid)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of acyclic objects: its
    repeated full scans of the growing heap cost a third of the time of a 10k-process parse."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def split_frame(body: str) -> tuple[str, str, int | None]:
    """`func (file:line)` → (func, file, line); the location is the last parenthesised group
    (C++ names hold parentheses: `Foo::bar(int)::{lambda()#1}::operator() (lib.so)`)."""
    match = _FRAME_BODY.match(body)
    if match is None:
        return body, "", None
    loc = match.group("loc")
    head, sep, tail = loc.rpartition(":")
    if sep and tail.isdigit():
        return match.group("func"), head, int(tail)
    return match.group("func"), loc, None


def is_python_file(path: str) -> bool:
    """True for Python source frames (`x.py`, `<frozen ...>`, `<string>`); False for native ones
    (`libc.so.6`, `callproc.c`, `ray/_raylet.so`)."""
    return path.endswith(_PY_SUFFIXES) or path.startswith("<")


class _Parser:
    """One pass over the lines; any line may start a new dump of any format."""

    def __init__(self, text: str, warnings: list[str]) -> None:
        self.text = text
        self.warnings = warnings
        self.processes: list[Process] = []
        self.proc: Process | None = None
        self.thread: Thread | None = None
        self.locals_target: dict[str, str] | None = None
        self.in_error = False
        self.fh_seen: set[str] = set()
        self.fh_current = False
        self.rule_after: Process | None = None  # the process a --subprocesses rule followed
        self.skipped = 0
        self.first_skipped: tuple[int, str] | None = None
        self.last_unknown = False
        self.frame_cache: dict[str, tuple[str, str, int | None, bool]] = {}
        self.node_id: str | None = None  # the node of a run_on_each_ray_node.py --dump section

    # -- process / thread bookkeeping -------------------------------------------------------
    def new_process(self, pid: int | None, title: str | None, source: str) -> Process:
        proc = Process(pid=pid, title=title or None, source=source, node_id=self.node_id)
        self.processes.append(proc)
        self.proc, self.thread, self.locals_target, self.in_error = proc, None, None, False
        self.fh_seen, self.fh_current = set(), False
        self.rule_after = None
        return proc

    # -- the pass ---------------------------------------------------------------------------
    def run(self) -> list[Process]:
        text = self.text
        n = len(text)
        pos = 0
        lineno = 0
        while pos < n:
            end = text.find("\n", pos)
            nxt = n if end < 0 else end + 1
            lineno += 1
            if text[pos] in "[{":
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
            self.line(text[pos:nxt].rstrip("\r\n"), lineno)
            pos = nxt
        self.finish()
        kept = [p for p in self.processes if p.threads or p.error or p.pid is not None]
        renumber_samples(kept)
        return kept

    def finish(self) -> None:
        if self.skipped:
            assert self.first_skipped is not None
            ln, sample = self.first_skipped
            self.warnings.append(f"{self.skipped} line(s) not recognised and skipped "
                                 f"(first at line {ln}: {sample[:80]!r})")
        if self.last_unknown and self.processes:
            self.warnings.append("the input ends with an unrecognised line: the last dump may be "
                                 "cut short; parsed as far as it goes")
        elif self.processes and not self.processes[-1].threads and not self.processes[-1].error \
                and self.processes[-1].pid is not None:
            self.warnings.append(f"process {self.processes[-1].pid} has a header but no thread: "
                                 "the dump was cut short")
        for proc in self.processes:
            if proc.python is None and proc.source == "faulthandler":
                proc.python = _python_from_paths(proc)

    def skip(self, lineno: int, line: str) -> None:
        self.skipped += 1
        if self.first_skipped is None:
            self.first_skipped = (lineno, line)
        self.last_unknown = True

    def line(self, line: str, lineno: int) -> None:  # noqa: C901 - one flat dispatch on the 1st char
        self.last_unknown = False
        if not line or line.isspace():
            self.locals_target = None
            return
        first = line[0]
        if first == " " or first == "\t":
            if not (line.startswith("  ! pid ") and self.node_dump_line(line)):
                self.indented(line, lineno)
            return
        if (first == "=" or first == "#") and self.node_dump_line(line):
            return
        self.locals_target = None
        if first == "T":
            thread = _THREAD.match(line)
            if thread is not None:
                self.start_thread(thread)
                return
            fh = _FH_THREAD.match(line)
            if fh is not None:
                self.start_fh_thread(fh)
                return
            if _FH_START.match(line):
                self.new_process(None, None, "faulthandler")
                return
        elif first == "P":
            proc = _PROCESS.match(line)
            if proc is not None:
                self.start_pyspy_process(int(proc.group("pid")), proc.group("title"))
                return
            py = _PYTHON.match(line)
            if py is not None and self.proc is not None and self.proc.python is None:
                self.proc.python = py.group("ver")
                return
            parent = _PARENT.match(line)
            if parent is not None and self.proc is not None:
                self.proc.parent_pid = int(parent.group("pid"))
                self.proc.role = self.proc.role or "child"
                return
            old = _OLD_PYTHON.match(line)
            if old is not None:
                self.start_old_pyspy(old.group("ver"))
                return
            if _PYSPY_ERROR.match(line) and self.error(line):
                return
        elif first == "S":
            ray = _RAY_STACK.match(line)
            if ray is not None:
                self.start_ray_stack(ray.group("ps"))
                return
            if _FH_STACK.match(line):
                self.start_fh_thread(None)
                return
            if self.in_error and _PYSPY_ERROR_DETAIL.match(line):
                return
        elif first == "C":
            fh = _FH_THREAD.match(line)
            if fh is not None:
                self.start_fh_thread(fh)
                return
            if self.in_error and _PYSPY_ERROR_DETAIL.match(line):
                return
        elif first == "F":
            if _FH_START.match(line):
                self.new_process(None, None, "faulthandler")
                return
        elif first == "-":
            if _SEPARATOR.match(line):  # --subprocesses: a rule between the processes
                self.thread = None
                self.rule_after = self.proc
                return
        elif first == "E" or first == "e":
            if _PYSPY_ERROR.match(line):
                if self.error(line):
                    return
            elif _FH_NOISE.match(line):
                return
        elif first == "R":
            if self.in_error and _PYSPY_ERROR_DETAIL.match(line):
                return
        elif first == "/":
            if self.proc is None or self.proc.threads or " " not in line.strip():
                return  # py-spy 0.1 printed the interpreter path before "Python version"
        self.skip(lineno, line)

    def indented(self, line: str, lineno: int) -> None:
        thread = self.thread
        if thread is not None:
            # "    func (file:line)" (py-spy), "\t func (file:line)" (py-spy 0.1)
            if (line.startswith("    ") and line[4] != " ") or line[0] == "\t":
                self.frame(line, lineno)
                return
            if line.startswith("  File "):
                fh = _FH_FRAME.match(line)
                if fh is not None:
                    lno = fh.group("line")
                    thread.frames.append(Frame(function=fh.group("func"), file=fh.group("file"),
                                               line=int(lno) if lno.isdigit() else None))
                    return
            if self.locals_target is not None:
                local = _LOCAL.match(line)
                if local is not None:
                    self.locals_target[local.group("name")] = local.group("repr")
                    return
            if thread.frames and _LOCALS_HEADER.match(line):
                frame = thread.frames[-1]
                if frame.locals is None:
                    frame.locals = {}
                self.locals_target = frame.locals
                return
        if self.in_error and _PYSPY_ERROR_DETAIL.match(line):
            return
        if _FH_NOISE.match(line):
            return
        self.skip(lineno, line)

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

    # -- starts -----------------------------------------------------------------------------
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
                or proc.source == "faulthandler"):
            proc = self.new_process(None, None, "py-spy-text-0.1")
        proc.python = version

    def start_thread(self, match: re.Match[str]) -> None:
        ident = match.group("id")
        proc = self.proc
        if proc is None or proc.source == "faulthandler" or proc.error:
            old = ident[:2].lower() == "0x" and match.group("name") is None
            proc = self.new_process(None, None, "py-spy-text-0.1" if old else "py-spy-text")
        states = match.group("state").split("+")
        os_tid = match.group("os")
        thread = Thread(
            thread_id=ident,
            os_thread_id=int(os_tid) if os_tid else (int(ident) if ident.isdigit() else None),
            name=match.group("name"),
            active=True if "active" in states else (False if "idle" in states else None),
            owns_gil="gil" in states,
        )
        proc.threads.append(thread)
        self.thread = thread
        self.locals_target = None

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
        self.thread = thread

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

    def frame(self, line: str, lineno: int) -> None:
        cached = self.frame_cache.get(line)
        if cached is None:
            match = _FRAME.match(line)
            func, file, lno = split_frame(match.group("body")) if match is not None else ("", "", None)
            if not file:  # "    Worker.get_obj": a line cut short, or not a frame at all
                self.skip(lineno, line)
                return
            cached = (func, file, lno, not is_python_file(file))
            if len(self.frame_cache) < _FRAME_CACHE_MAX:
                self.frame_cache[line] = cached
        func, file, lno, native = cached
        assert self.thread is not None
        self.thread.frames.append(Frame(function=func, file=file, line=lno, native=native))
        self.locals_target = None

    # -- JSON -------------------------------------------------------------------------------
    def json_at(self, pos: int, lineno: int) -> int:
        """Decode a JSON value starting at `pos`; returns the offset after it (pos if none)."""
        try:
            value, end = json.JSONDecoder().raw_decode(self.text, pos)
        except ValueError:
            return self.json_partial(pos, lineno)
        return end if self.json_value(value, lineno) else pos

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
            found = _PROCESSES_FIELD.search(text, start)
            if found is None:
                return start
            array_at = found.end() - 1
        decoder = json.JSONDecoder()
        items: list[Any] = []
        i = array_at + 1
        n = len(text)
        while True:
            while i < n and text[i] in " \t\r\n,":
                i += 1
            if i >= n or text[i] == "]":
                break
            try:
                item, i = decoder.raw_decode(text, i)
            except ValueError:
                break
            items.append(item)
        if not items or not all(isinstance(it, dict) for it in items):
            return start
        value: Any = {"schema": STACKS_SCHEMA, "processes": items} if is_doc else items
        if not self.json_value(value, lineno):
            return start
        self.warnings.append(f"line {lineno}: JSON cut short: kept the {len(items)} complete "
                             f"{'process' if is_doc else 'thread'} record(s) before the cut")
        self.last_unknown = False
        return i


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


def _python_from_paths(proc: Process) -> str | None:
    for thread in proc.threads:
        for frame in thread.frames:
            match = _STDLIB_VERSION.search(frame.file)
            if match:
                return match.group(1)
    return None


def iter_frames(processes: list[Process]) -> Iterator[Frame]:
    """Every frame of every thread (handy for checks and tests)."""
    for proc in processes:
        for thread in proc.threads:
            yield from thread.frames
