"""Read every stack format responders paste into one model: `Process` → `Thread` → `Frame`.

The entry points (`parse_text`, `parse_bytes`, `parse_path`) decode the input and hand it to the
one dispatcher, `reader.Reader`, which gives each line to the reader of its family (merged logs
are first split per source by `streams`). Formats (auto-detected, mixed freely, back to back):

- `py-spy-text` / `py-spy-text-0.1` / `ray-stack` / node dumps (`pyspy_text`): py-spy 0.1-0.4 text
  with `--native`, `--locals`, `--subprocesses` and py-spy's own errors; `ray stack`'s sections;
- `py-spy-json` / `stacks-v1` (`pyspy_json`): JSON documents, cut short or not;
- `faulthandler` / `traceback` (`python_tb`): faulthandler's sections (also unindented, or with no
  thread header), tracebacks written outermost first (`most recent call last`) or innermost first
  (`most recent call first`, gdb's py-bt), headerless frame lists ordered from their content;
- `thread-dump` (`recipes`): `sys._current_frames()` recipes (`# Thread: name(id)`,
  `-- Thread ID: N ---`, `thread <Thread(...)>:`, `Thread 0x7f.. (name):`, log-prefixed);
- `gdb` / `eu-stack` / `lldb` (`native`): gdb `bt`, `thread apply all bt [full]`, `py-bt` (merged
  into the same threads), typed sessions and the gstack/pstack filter, eu-stack [-v], lldb
  `bt [all]`: every frame `native: true`;
- pasted forms (`pastes`, best effort, each assumption said in a warning): Markdown fences,
  rendered Markdown, bare or column-aligned frames, notes after a frame, `...` elisions, arrow
  chains, names alone on a line; merged logs with `[rankN]:`, `[defaultN]:[rankN]:` or Ray
  `(Name pid=N)` prefixes read per source;
- collective facts (`collective_text`): TORCH_DISTRIBUTED_DEBUG=DETAIL mismatches (on a line, in
  a traceback, wrapped), ProcessGroupNCCL watchdog and heartbeat lines, the desync report,
  monitored_barrier: per-rank `Process.collective` facts, on the process of that rank when the
  input has one, else on a process with the rank and no thread (no stack is invented).

Frames are innermost first in the model whatever order the input used. A thread without a known
process or thread id is still a thread (pid/thread_id None). Unknown lines between dumps (shell
prompts, log lines) are skipped; input with no dump at all, binary or empty input raises
`BadInputError`. A dump cut short is parsed as far as it goes, with a warning. Every input is read
in time linear in its size: lines are cut at `pastes.MAX_LINE`, no pattern backtracks over a
whitespace run, JSON is never re-tried inside a span that already failed to decode, and deep
nesting is not recursed into.
"""


from __future__ import annotations

import os
import re
import sys
from typing import Any

from debug_hang.errors import BadInputError
from debug_hang.model import STACKS_SCHEMA, Process
from debug_hang.parse.collective_text import attach_collectives, mismatch_in_text
from debug_hang.parse.frames import is_python_file, split_frame
from debug_hang.parse.reader import Reader
from debug_hang.parse.streams import STREAM_PREFIX, Stream, demux
from debug_hang.perf import paused_gc

__all__ = ["FORMATS_HELP", "decode_input", "is_python_file", "parse_bytes", "parse_path",
           "parse_text", "renumber_samples", "split_frame"]

FORMATS_HELP = """input formats (auto-detected; several may follow each other in one file):
  py-spy-text      py-spy dump (0.2 to 0.4 layouts), with --native, --locals, --subprocesses
  py-spy-text-0.1  py-spy 0.1 `--dump` (Thread 0xADDR (idle), tab-indented frames)
  py-spy-json      py-spy dump --json
  ray-stack        `ray stack` ("Stack dump for <ps line>" + py-spy text per worker)
  faulthandler     Python faulthandler (dump_traceback[_later], register, crash), also with its
                   indentation stripped or no thread header
  stacks-v1        debug-hang/stacks/v1 JSON (what parse_stacks.py and diagnose write)
  traceback        Python tracebacks: "most recent call last" (a Ctrl-C KeyboardInterrupt in the
                   hung wait) and "most recent call first" (gdb py-bt); File lines with no header
                   (traceback.print_stack) are ordered by their content
  thread-dump      sys._current_frames() recipes: `# Thread: name(id)`, `-- Thread ID: N ---`,
                   `thread <Thread(name, started N)>:`, `Thread 0x7f.. (name):`, in log lines
  gdb              gdb `bt`, `thread apply all bt [full]`, `thread apply all py-bt` (merged into
                   the native threads), a typed gdb session, pstack/gstack; C++ names demangled
  eu-stack         elfutils eu-stack -p PID [-v]
  lldb             lldb `bt` / `bt all` (`thread backtrace all`)
  frames           frame lists without headers (dashboard Stack Trace view, trimmed pastes),
                   `Thread (idle): "name"` without id, `MainThread:` over bare frames, frames in
                   aligned columns, notes after frames (`<- blocks`, `(some note)`), `...`
                   elisions, `a -> b -> c` / `a → b → c` chains (function names only)
  collective facts TORCH_DISTRIBUTED_DEBUG=DETAIL "Detected mismatch between collectives" (alone,
                   in a traceback, wrapped), NCCL watchdog timeouts and progress ("last enqueued
                   work"), the desync report, monitored_barrier: per-rank facts in "collective"
  pasted forms     any of these inside ``` fences or rendered Markdown; merged logs with
                   `[rankN]: `, `[defaultN]:[rankN]: ` or Ray `(Name pid=N) ` prefixes are read
                   per source
  DIR              every file inside; a diagnose folder's stacks.json is used alone"""

_MISMATCH_MARK = "Detected mismatch between collectives"
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
            "faulthandler, a Python traceback, gdb/pstack/eu-stack/lldb backtraces, "
            "`func (file:line)` frame lines or debug-hang/stacks/v1 JSON; see --help for the formats)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


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
        streams = demux(text)
        if streams is None:
            parser = Reader(text, sink)
            processes = parser.run()
            facts = parser.collectives
        else:
            processes, facts = _parse_streams(streams, sink)
        if _MISMATCH_MARK in text and len({f.get("rank") for f in facts if "shapes" in f or "dtypes" in f}) < 2:
            facts = facts + mismatch_in_text(text, STREAM_PREFIX)  # wrapped across prefixed lines
        if facts:
            attach_collectives(processes, facts, sink)
        renumber_samples(processes)
    if not processes:
        raise BadInputError(_NO_DUMP)
    return processes


def _parse_streams(streams: list[Stream], warnings: list[str]) -> tuple[list[Process], list[dict[str, Any]]]:
    """Parse each source of a merged log on its own; its processes take the source's pid/rank."""
    processes: list[Process] = []
    facts: list[dict[str, Any]] = []
    named = [s.key for s in streams if s.key]
    warnings.append(f"read {len(named)} source(s) apart by their line prefixes "
                    f"({', '.join(named[:6])}{', ...' if len(named) > 6 else ''}); each one's "
                    "processes take its rank or pid")
    for stream in streams:
        local: list[str] = []
        parser = Reader("\n".join(stream.lines), local)
        procs = parser.run()
        for proc in procs:
            if proc.pid is None and stream.pid is not None:
                proc.pid = stream.pid
            if proc.rank is None and stream.rank is not None:
                proc.rank = stream.rank
            if stream.name and not (proc.actor_class or proc.task_name):
                if stream.name[:1].isupper():  # Ray prints an actor's class, a task's function
                    proc.actor_class = stream.name
                else:
                    proc.task_name = stream.name
            proc.node_ip = proc.node_ip or stream.node_ip
        processes.extend(procs)
        for fact in parser.collectives:  # a watchdog line says its rank, or its prefix does
            if fact.get("rank") is None and stream.rank is not None:
                fact["rank"] = stream.rank
        facts.extend(parser.collectives)
        warnings.extend(f"{stream.key.rstrip(':')}: {w}" if stream.key else w for w in local)
    return processes, facts




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
