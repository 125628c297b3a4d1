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

And what people paste (best effort, `pastes.py`; each assumption is said in a warning):

- any of the above inside Markdown fences, the first header possibly on the fence line;
- `traceback`: Python tracebacks (innermost frame = where the thread was when it raised, e.g. a
  KeyboardInterrupt in a hung wait), chained ones in one process;
- `frames`: frames with no process header (the dashboard's Stack Trace view, a trimmed paste),
  indented or not; `Thread (idle): "name"` without its id; a thread name alone on its line
  (`MainThread:`) over bare frames; `...` for elided frames; `a → b → c` arrow chains (function
  names only; read innermost first unless the chain visibly starts at an entry point);
- dumps rendered as Markdown and copied back (`<module>` lost, `logging/init.py`);
- merged logs whose lines carry a source prefix (`[rank1]: `, `(RayTrainWorker pid=123) `): read
  per source, each process given that rank or pid;
- `torch-mismatch`: TORCH_DISTRIBUTED_DEBUG=DETAIL "Detected mismatch between collectives": each
  rank it names gets a `Process.collective` fact (op, sequence number, shapes) — on the process of
  that rank when the input has one, else on a process with the rank and no thread (no stack is
  invented).

Frames are innermost first, as every one of these dumpers prints them. A thread without a known
process or thread id is still a thread (pid/thread_id None). Unknown lines between dumps (shell
prompts, log lines) are skipped; input with no dump at all, binary or empty input raises
`BadInputError`. A dump cut short is parsed as far as it goes, with a warning. Every input is read
in time linear in its size: lines are cut at `pastes.MAX_LINE`, no pattern backtracks over a
whitespace run, JSON is never re-tried inside a span that already failed to decode, and deep
nesting is not recursed into.
"""


from __future__ import annotations

import gc
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from debug_hang.errors import BadInputError
from debug_hang.model import STACKS_SCHEMA, Process
from debug_hang.parse.collective_text import attach_collectives, mismatch_in_text
from debug_hang.parse.frames import is_python_file, split_frame
from debug_hang.parse.reader import Reader
from debug_hang.parse.streams import STREAM_PREFIX, Stream, demux

__all__ = ["FORMATS_HELP", "decode_input", "is_python_file", "parse_bytes", "parse_path",
           "parse_text", "paused_gc", "renumber_samples", "split_frame"]

FORMATS_HELP = """input formats (auto-detected; several may follow each other in one file):
  py-spy-text      py-spy dump (0.2 to 0.4 layouts), with --native, --locals, --subprocesses
  py-spy-text-0.1  py-spy 0.1 `--dump` (Thread 0xADDR (idle), tab-indented frames)
  py-spy-json      py-spy dump --json
  ray-stack        `ray stack` ("Stack dump for <ps line>" + py-spy text per worker)
  faulthandler     Python faulthandler (dump_traceback, dump_traceback_later, register, crash)
  stacks-v1        debug-hang/stacks/v1 JSON (what parse_stacks.py and diagnose write)
  traceback        Python tracebacks ("Traceback (most recent call last):"), e.g. a Ctrl-C
                   KeyboardInterrupt in the hung wait; the innermost frame is the blocking one
  frames           frame lists without headers (dashboard Stack Trace view, trimmed pastes),
                   `Thread (idle): "name"` without id, `MainThread:` over bare frames, `...`
                   elisions, `a -> b -> c` / `a → b → c` chains (function names only)
  torch-mismatch   TORCH_DISTRIBUTED_DEBUG=DETAIL "Detected mismatch between collectives":
                   a per-rank fact (op, sequence number, shapes) in each process's "collective"
  pasted forms     any of these inside ``` fences or rendered Markdown; merged logs with
                   `[rankN]: ` or Ray `(Name pid=N) ` line prefixes are read per source
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
            "faulthandler, a Python traceback, `func (file:line)` frame lines or "
            "debug-hang/stacks/v1 JSON; see --help for the formats)")
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
