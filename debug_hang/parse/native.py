"""Native backtraces: gdb (`bt`, `thread apply all bt [full]`, `py-bt`, a typed session), the
gstack/pstack filter of gdb's output, elfutils' `eu-stack [-v]` and lldb's `bt [all]`.

Every frame is `native: true` (function, library or source file:line); gdb's `py-bt` adds the
thread's Python frames (innermost first, `Traceback (most recent call first):`), merged into the
same thread where the native frames of that LWP came first: the Python frames go where the
interpreter's eval loop is, so the stack reads innermost first throughout.

- gdb: `Thread 4 (Thread 0x7f.. (LWP 4242) "name"):` then `#3  0x00007f.. in func (args) at
  file.c:52` / `... from /usr/lib/libpython3.10.so` / `#0  func (args) at file.h:146` (inlined) /
  `#5  0x.. in ?? ()`; demangled C++ names keep their parentheses (the last group is the argument
  list). A headerless `bt` is one thread.
- eu-stack: `PID N - process`, `TID N:`, `#0  0x00007f.. symbol`; `-v` adds ` - 1 symbol - /lib`
  and the source on the next line.
- lldb: `Process N stopped`, `* thread #1, name = 'x', stop reason = ...`,
  `  * frame #0: 0x00007f.. libc.so.6`__futex_abstimed_wait_common at futex-internal.c:57:12`;
  a thread listed again (the attach summary, then `bt all`) keeps its fuller listing.

All of it is read line by line without backtracking: call syntax is taken apart with `rfind` and
one backward parenthesis scan per frame line.
"""

from __future__ import annotations

import re

from debug_hang.model import Frame, Process, Thread
from debug_hang.parse.frames import is_python_file
from debug_hang.parse.state import ReaderState

GDB_THREAD = re.compile(
    r'^Thread (?P<num>\d{1,7}) \((?:Thread (?P<addr>0x[0-9a-fA-F]{1,16}) \(LWP (?P<lwp>\d{1,10})\)'
    r'|LWP (?P<lwp2>\d{1,10})|process (?P<pid>\d{1,10}))(?: "(?P<name>[^"]{0,200})")?(?: \(Exiting\))?\):$'
)
GDB_FRAME = re.compile(r"^#(?P<num>\d{1,5}) {1,3}(?P<rest>\S.*)$")
_GDB_ADDR = re.compile(r"^0x[0-9a-fA-F]{1,16} in ")
_GDB_ATTACH = re.compile(r"^(?:Attaching to (?:process|program: .*?, process) (?P<pid>\d{1,10})"
                         r"|\[Inferior \d+ \(process (?P<pid2>\d{1,10})\) (?:detached|killed)\])$")
# gdb and lldb chatter around the stacks: attach notices, the stop location, `info threads`.
_NATIVE_NOISE = re.compile(
    r"^(?:\[New (?:LWP|Thread) .*\]|\[Thread debugging using libthread_db enabled\]"
    r"|Using host libthread_db library .*|Reading symbols from .*|Downloading .*"
    r"|Backtrace stopped: .*|\d+\t.*|warning: .*|\(No debugging symbols found in .*\)"
    r"|Missing separate debuginfo.*|Try: (?:zypper|yum|dnf|apt).*|Unable to locate python frame"
    r"|\[?Detaching from (?:program|process) .*|Executable module set to .*|Architecture set to: .*"
    r"|  Id   Target Id .*|[* ] {1,3}\d{1,7} {2,}(?:Thread|LWP|process) .*"
    r"|  \((?:unable to read python frame information|frame information optimized out)\))$"
)
_STOP_HEAD = re.compile(r"^[A-Za-z_][\w.@:<>~]{0,300} \(")
_PROMPT = re.compile(r"^\((?:gdb|lldb)\) ?")
EU_PROCESS = re.compile(r"^PID (?P<pid>\d{1,10}) - (?:process|core)$")
EU_THREAD = re.compile(r"^TID (?P<tid>\d{1,10}):$")
_EU_FRAME = re.compile(r"^#(?P<num>\d{1,5}) +0x(?P<addr>[0-9a-fA-F]{1,16})(?P<rest>(?: .*)?)$")
_EU_SOURCE = re.compile(r"^ {4}(?P<file>[^\s:]+):(?P<line>\d{1,7})(?::\d{1,5})?$")
LLDB_PROCESS = re.compile(r"^Process (?P<pid>\d{1,10}) stopped$")
LLDB_THREAD = re.compile(r"^[* ] thread #(?P<num>\d{1,7})(?P<rest>[:,].*)?$")
_LLDB_FRAME = re.compile(r"^ {2,6}(?:\* )?frame #(?P<num>\d{1,5}): (?P<addr>0x[0-9a-fA-F]{1,16})(?P<rest>(?: .*)?)$")
_LLDB_NAME = re.compile(r"name = '(?P<name>[^']{0,200})'")
_LLDB_TID = re.compile(r"tid = (?P<tid>0x[0-9a-fA-F]{1,16}|\d{1,10})")
_OFFSET = re.compile(r" \+ \d{1,10}$")
# py-bt inside a gdb thread: the GIL wait marker and C functions called from Python.
PYBT_START = "Traceback (most recent call first):"
_PYBT_GIL = "  Waiting for the GIL"
_PYBT_BUILTIN = re.compile(r"^  <built-in (?:method|function) (?P<name>[\w.]{1,200})"
                           r"(?: of (?P<owner>[\w.]{1,200}) object)?(?: at (?:remote )?0x[0-9a-fA-F]+)?>$")
_PYBT_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line (?P<line>\d{1,7}), in (?P<func>.+)$')
_MAX_ARGS = 8
_MAX_ARG_CHARS = 200


def pybt_native_frame(line: str) -> Frame | None:
    """py-bt's lines for C code under Python: `  Waiting for the GIL`, `  <built-in method sleep of
    module object at remote 0x..>` (a `_thread.lock.__enter__` is a Python lock taken in C)."""
    if line == _PYBT_GIL:
        return Frame(function="Waiting for the GIL", native=True)
    builtin = _PYBT_BUILTIN.match(line)
    if builtin is None:
        return None
    owner = builtin.group("owner")
    name = builtin.group("name") if owner in (None, "module") else f"{owner}.{builtin.group('name')}"
    return Frame(function=name, native=True)


def is_stop_location(line: str) -> bool:
    """gdb's line for where it stopped on attach: `func (args) at file.c:57` (no `#N`)."""
    at = line.rfind(") at ")
    if at < 0 or " " in line[at + 5:] or not line[-1:].isdigit():
        return False
    return _STOP_HEAD.match(line) is not None


def split_call(text: str, spaced: bool) -> tuple[str, str | None]:
    """`name (args)` → (name, args); `name(args)` when not `spaced` (lldb) and the group holds
    `=` (else it is the signature of a function without debug information). The argument list
    is the last top-level parenthesised group, found by one backward scan (C++ names keep their
    own parentheses: `wait<...>(std::unique_lock<...>&)`)."""
    text = text.rstrip()
    if not text.endswith(")"):
        return text, None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                args = text[i + 1:-1]
                head = text[:i]
                if spaced:
                    if not head.endswith(" "):
                        return text, None
                    return head.rstrip(), args
                if "=" not in args:  # `std::thread::join()`: the signature, not arguments
                    return text, None
                return head, args
    return text, None


def parse_args(args: str | None) -> dict[str, str] | None:
    """gdb's `(a=1, b=<x at 0x..>, c=...)` as {name: value}, top-level commas only, bounded."""
    if not args:
        return None
    out: dict[str, str] = {}
    depth = 0
    start = 0
    for i, ch in enumerate(args):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth <= 0:
            _add_arg(out, args[start:i])
            start = i + 1
            if len(out) >= _MAX_ARGS:
                return out
    _add_arg(out, args[start:])
    return out or None


def _add_arg(out: dict[str, str], item: str) -> None:
    name, eq, value = item.strip().partition("=")
    if eq and name and " " not in name:
        out[name] = value[:_MAX_ARG_CHARS]


def gdb_frame(rest: str) -> Frame:
    """One gdb frame after its `#N`: `[0xADDR in ]func (args)[ at file:line| from lib]`."""
    if rest.startswith("0x"):
        addr = _GDB_ADDR.match(rest)
        if addr is not None:
            rest = rest[addr.end():]
    file, line = "", None
    at = rest.rfind(" from ")
    if at > 0 and " " not in rest[at + 6:]:
        file, rest = rest[at + 6:], rest[:at]
    else:
        at = rest.rfind(" at ")
        if at > 0 and " " not in rest[at + 4:]:
            loc, colon, lno = rest[at + 4:].rpartition(":")
            if colon and lno.isdigit():
                file, line, rest = loc, int(lno), rest[:at]
    func, args = split_call(rest, spaced=True)
    return Frame(function=func or "??", file=file, line=line, native=True, locals=parse_args(args))


def eu_frame(rest: str) -> Frame:
    """eu-stack's text after the address: ` symbol`, `     symbol - /lib/x.so`, ` - 1 symbol - /lib`."""
    rest = rest.strip()
    if rest.startswith("- ") and rest[2:3].isdigit():
        rest = rest[2:].lstrip("0123456789").strip()
    module = ""
    at = rest.rfind(" - ")
    if at >= 0 and rest[at + 3:].startswith("/") and " " not in rest[at + 3:]:
        module, rest = rest[at + 3:], rest[:at].strip()
    return Frame(function=rest or "??", file=module, native=True)


def lldb_frame(rest: str) -> Frame:
    """lldb's text after the address: `` module`symbol(args) at file.c:57:12 `` or `` module`symbol + 23 ``."""
    rest = rest.strip()
    module, tick, symbol = rest.partition("`")
    if not tick:
        return Frame(function="??", file=rest, native=True)
    file, line = module, None
    at = symbol.rfind(" at ")
    if at > 0 and " " not in symbol[at + 4:]:
        parts = symbol[at + 4:].split(":")
        if len(parts) >= 2 and parts[1].isdigit():
            file, line, symbol = parts[0], int(parts[1]), symbol[:at]
    offset = _OFFSET.search(symbol)
    if offset is not None:
        symbol = symbol[:offset.start()]
    func, args = split_call(symbol, spaced=False)
    return Frame(function=func or "??", file=file, line=line, native=True, locals=parse_args(args))


class NativeStacks(ReaderState):
    """Threads of gdb, pstack, eu-stack and lldb output (and gdb's py-bt) as `native: true` frames."""

    def native_line(self, line: str) -> bool:
        """A line of a native dumper's output (prompt removed); False if it is none of them."""
        if line[:1] == "(" and _PROMPT.match(line):
            line = _PROMPT.sub("", line, count=1)
            if not line or line.startswith(("bt", "thread apply", "info threads", "process attach",
                                            "quit", "py-bt", "set ")):
                return True  # a command typed at gdb's or lldb's prompt
        if self.pybt is not None and self.pybt_line(line):
            return True
        first = line[:1]
        if first == "#":
            return self.native_frame(line)
        if first in "TP" and self.native_header(line):
            return True
        if first in "* " and line[1:10] == " thread #":
            match = LLDB_THREAD.match(line)
            if match is not None:
                self.start_lldb_thread(match)
                return True
        elif first == " " and "frame #" in line[:14]:
            frame = _LLDB_FRAME.match(line)
            if frame is not None and self.native_kind == "lldb" and self.thread is not None:
                self.add_native(int(frame.group("num")), lldb_frame(frame.group("rest")))
                return True
        if first in "A[" and self.note_attach(_GDB_ATTACH.match(line)):
            return True
        if self.native_kind is not None and first == " " and self.eu_source(line):
            return True
        return _NATIVE_NOISE.match(line) is not None or is_stop_location(line)  # chatter: skipped

    def native_header(self, line: str) -> bool:
        """gdb's `Thread N (...)`, py-bt's header in a gdb thread, eu-stack's `PID`/`TID`, lldb's `Process N stopped`."""
        match = GDB_THREAD.match(line)
        if match is not None:
            self.start_gdb_thread(match)
            return True
        if line == PYBT_START and self.native_kind == "gdb" and self.thread is not None:
            self.pybt = []
            return True
        tid = EU_THREAD.match(line)
        if tid is not None:
            self.start_native_thread("eu-stack", int(tid.group("tid")), None, int(tid.group("tid")))
            return True
        proc = EU_PROCESS.match(line) or LLDB_PROCESS.match(line)
        if proc is not None:
            self.start_native_process("lldb" if line.endswith("stopped") else "eu-stack", int(proc.group("pid")))
            return True
        return False

    def eu_source(self, line: str) -> bool:
        """eu-stack -v's source line under a frame: kept as the frame's `code` (`file.c:57`)."""
        source = _EU_SOURCE.match(line)
        if source is None or self.thread is None or not self.thread.frames:
            return False
        last = self.thread.frames[-1]
        if last.native and last.code is None:
            last.code = f"{source.group('file')}:{source.group('line')}"
        return True

    def note_attach(self, match: re.Match[str] | None) -> bool:
        """`Attaching to process N` / `[Inferior 1 (process N) detached]`: the process's pid."""
        if match is None:
            return False
        pid = int(match.group("pid") or match.group("pid2"))
        proc = self.proc
        if match.group("pid") is not None or proc is None or proc.source not in _NATIVE_SOURCES:
            self.start_native_process("gdb", pid)
        elif proc.pid is None:
            proc.pid = pid
        self.end_pybt()
        return True

    # -- processes and threads --------------------------------------------------------------
    def start_native_process(self, source: str, pid: int | None) -> Process:
        self.end_pybt()
        proc = self.new_process(pid, None, source)
        self.native_kind = source if source != "eu-stack" else "eu"
        self.native_seen = {}
        return proc

    def native_process(self, source: str) -> Process:
        proc = self.proc
        if proc is None or proc.source not in _NATIVE_SOURCES:
            proc = self.start_native_process(source, None)
        return proc

    def start_native_thread(self, source: str, key: int, name: str | None, lwp: int | None,
                            ident: str | None = None) -> Thread:
        """A thread of the current native process; a thread number seen before in it starts a new
        process (another dump), except gdb's py-bt of the same LWP (merged) and lldb's listing
        after its attach summary (replaces the one-frame summary)."""
        self.end_pybt()
        proc = self.native_process(source)
        previous = self.native_seen.get(key)
        if previous is not None and not (source == "lldb" and len(previous.frames) <= 1):
            if source == "gdb" and previous.os_thread_id == lwp:
                self.thread, self.loose = previous, False
                self.pybt_merge = True
                return previous
            proc = self.start_native_process(source, None)
            previous = None
        if previous is not None:  # lldb: the attach summary listed it with its first frame only
            previous.frames = []
            thread = previous
        else:
            thread = Thread(thread_id=ident or (str(lwp) if lwp is not None else str(key)),
                            os_thread_id=lwp, name=name)
            proc.threads.append(thread)
            self.native_seen[key] = thread
        self.native_kind = "eu" if source == "eu-stack" else source
        self.thread, self.loose, self.pybt_merge = thread, False, False
        self.native_next = 0
        if lwp is not None and (key == 1 or lwp == proc.pid) and source == "gdb" and proc.pid is None:
            proc.pid = lwp  # gdb's thread 1 is the main thread: its LWP is the pid
        return thread

    def start_gdb_thread(self, match: re.Match[str]) -> None:
        lwp_text = match.group("lwp") or match.group("lwp2") or match.group("pid")
        lwp = int(lwp_text) if lwp_text else None
        self.start_native_thread("gdb", int(match.group("num")), match.group("name"), lwp)

    def start_lldb_thread(self, match: re.Match[str]) -> None:
        rest = match.group("rest") or ""
        name = _LLDB_NAME.search(rest)
        tid = _LLDB_TID.search(rest)
        lwp = None
        if tid is not None:
            text = tid.group("tid")
            lwp = int(text, 16) if text.startswith("0x") else int(text)
        self.start_native_thread("lldb", int(match.group("num")), name.group("name") if name else None, lwp)

    # -- frames -----------------------------------------------------------------------------
    def native_frame(self, line: str) -> bool:
        """`#N ...` of gdb or eu-stack; a `#0` with no thread header open starts a thread."""
        kind = self.native_kind if self.thread is not None and self.proc is not None \
            and self.proc.source in _NATIVE_SOURCES else None
        eu = _EU_FRAME.match(line)
        gdb = GDB_FRAME.match(line) if eu is None or " in " in line else None
        if gdb is None and eu is None:
            return False
        num = int((gdb or eu).group("num"))  # type: ignore[union-attr]
        style = "gdb" if gdb is not None else "eu"
        if kind is None or (num == 0 and self.thread is not None and self.thread.frames):
            if num != 0:
                return False  # a `#3 ...` line alone is not enough to start a dump
            source = "gdb" if style == "gdb" else "eu-stack"
            if kind is None:
                self.native_process(source)
            thread = Thread()
            assert self.proc is not None
            self.proc.threads.append(thread)
            self.thread, self.loose, self.native_next = thread, False, 0
            self.native_kind = style
            self.count("native-headerless")
        frame = gdb_frame(gdb.group("rest")) if gdb is not None else eu_frame(eu.group("rest"))  # type: ignore[union-attr]
        self.add_native(num, frame)
        return True

    def add_native(self, num: int, frame: Frame) -> None:
        assert self.thread is not None
        if num != self.native_next:
            self.count("native-gap")
        self.native_next = num + 1
        self.thread.frames.append(frame)

    # -- gdb's py-bt ----------------------------------------------------------------------------
    def pybt_line(self, line: str) -> bool:
        """A line of a py-bt listing: a Python frame, its source line, a C call, the GIL marker."""
        assert self.pybt is not None
        match = _PYBT_FRAME.match(line)
        if match is not None:
            file = match.group("file")
            self.pybt.append(Frame(function=match.group("func"), file=file, line=int(match.group("line")),
                                   native=not is_python_file(file)))
            return True
        if line.startswith("    ") and self.pybt and self.pybt[-1].code is None and not self.pybt[-1].native:
            self.pybt[-1].code = line.strip()[:300]
            return True
        special = pybt_native_frame(line)
        if special is not None:
            self.pybt.append(special)
            return True
        if line.startswith("  ") and _NATIVE_NOISE.match(line):
            return True
        self.end_pybt()
        return False


_NATIVE_SOURCES = ("gdb", "eu-stack", "lldb")
