"""The job's source around its frames, read on the process's own node (a submitted job's code
lives in that node's runtime working dir): the line of each innermost frame, the lines around
the job's innermost one or the whole loop it runs in, the `with` blocks a frame is inside
(who holds a lock), who could set what the job's innermost frame waits on and the Ray calls each
job frame makes after its line (probe/setters.py). Redacted before anything is cut."""

from __future__ import annotations

import linecache
import os
import re
from collections.abc import Callable

from debug_hang.model import Frame, Process, split_ray_title
from debug_hang.probe.setters import await_site, awaited_in, calls_after, remote_awaits, set_facts, setters_of
from debug_hang.probe.withblocks import with_facts
from debug_hang.redact import Redactor

# Source lines are read for the innermost frames only: the deciding frame is almost always there.
SOURCE_DEPTH = 12
CONTEXT_LINES = 3  # lines kept above and below the job's innermost frame
LOOP_LINES = 24  # ... or the whole loop it runs in, when the loop is at most this long
MAX_CWD_FILES = 32  # top-level .py files of a process's working dir read for its class's source
OUTER_LOOP_FRAMES = 2  # the job's callers of that frame whose loop is kept too
WITH_DEPTH = 40  # frames whose enclosing `with` blocks are read (a lock holder can wait deep below)
_LIBRARY_PATH = re.compile(r"(/site-packages/|/dist-packages/|/lib/python\d+\.\d+/)")


def add_source_lines(proc: Process, depth: int = SOURCE_DEPTH, redactor: Redactor | None = None) -> None:
    """Attach the source line of the innermost `depth` Python frames of each thread.

    Read here, on the process's own node: a submitted job's code lives in that node's runtime
    working dir, which the machine running the diagnosis usually does not have. Lines are
    redacted before they are cut (a cut token is no longer recognisable).
    """
    clean = (redactor or Redactor()).redact

    def numbered(path: str, first: int, last: int) -> list[str]:
        return [f"{n}: {clean(linecache.getline(path, n).rstrip())[:160]}"
                for n in range(first, last + 1) if linecache.getline(path, n)]

    for thread in proc.threads:
        _add_with_facts(thread.frames, clean)
        _add_setters(thread.frames, clean)
        job_frames = 0
        for frame in thread.frames[:depth]:
            if frame.native or not frame.line or not frame.file.endswith(".py"):
                continue
            line = linecache.getline(frame.file, frame.line)
            if line:
                frame.code = clean(line.strip())[:200]
            if _LIBRARY_PATH.search(frame.file) or job_frames > OUTER_LOOP_FRAMES:
                continue
            job_frames += 1
            first, last = loop_span(frame.file, frame.line)
            if job_frames == 1 and (first, last) == (frame.line, frame.line):
                # In no loop it fits: up to its `def`, so that the analysis sees it runs once a call
                # (a single long sleep is no poll).
                first = enclosing_def(frame.file, frame.line) or first
            if job_frames == 1:
                # The job's innermost frame: keep the lines around it and the whole loop it runs
                # in, when short (the analysis reads what the loop tests and what it changes).
                frame.context = numbered(frame.file, max(1, min(first, frame.line - CONTEXT_LINES)),
                                         max(last, frame.line + CONTEXT_LINES))
            elif (first, last) != (frame.line, frame.line):
                # A caller of it that loops (a sleep in a helper called once per item): its loop.
                frame.context = numbered(frame.file, first, last)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


_LOOP_HEAD = re.compile(r"^\s*(?:async\s+)?(?:while|for)\b")
_BLOCK_HEAD = re.compile(r"^\s*(?:async\s+)?(?:def|class)\b")


def loop_span(path: str, line: int) -> tuple[int, int]:
    """(first, last) line of the innermost `while`/`for` loop around `line` when the whole loop
    fits in LOOP_LINES lines; (line, line) when there is none or it is longer. A text scan by
    indentation on the node's copy of the file (no parse: a frame line is all it has)."""
    text = linecache.getline(path, line)
    if not text.strip():
        return line, line
    head, indent = None, _indent(text) + (1 if _LOOP_HEAD.match(text) else 0)
    for n in range(line, max(0, line - LOOP_LINES), -1):
        cur = linecache.getline(path, n)
        if not cur.strip() or cur.lstrip().startswith("#") or _indent(cur) >= indent:
            continue
        if _LOOP_HEAD.match(cur):
            head = n
            break
        if _BLOCK_HEAD.match(cur):
            break
        indent = _indent(cur)  # an enclosing if/with/try: look further out
    if head is None:
        return line, line
    base = _indent(linecache.getline(path, head))
    for n in range(head + 1, head + LOOP_LINES + 1):
        cur = linecache.getline(path, n)
        if not cur:
            return head, n - 1  # the file ends inside the loop
        if cur.strip() and not cur.lstrip().startswith("#") and _indent(cur) <= base:
            return head, n  # the first line after the loop, so that the reader sees it end
    return line, line


def enclosing_def(path: str, line: int) -> int | None:
    """The line of the `def` (or `class`) whose body holds `line`, when it is at most LOOP_LINES
    above it and no loop header is met on the way; None otherwise (a text scan, as loop_span)."""
    text = linecache.getline(path, line)
    if not text.strip():
        return None
    indent = _indent(text)
    for n in range(line - 1, max(0, line - LOOP_LINES) - 1, -1):
        cur = linecache.getline(path, n)
        if not cur.strip() or cur.lstrip().startswith("#") or _indent(cur) >= indent:
            continue
        if _LOOP_HEAD.match(cur):
            return None
        if _BLOCK_HEAD.match(cur):
            return n
        indent = _indent(cur)
    return None


def _add_setters(frames: list[Frame], clean: Callable[[str], str]) -> None:
    """Who could set what the job's innermost frame waits on, and the Ray calls each job frame's
    function makes after its line (probe/setters.py): kept only when there are some."""
    innermost = True
    for frame in frames[:WITH_DEPTH]:
        if frame.native or not frame.line or not frame.file.endswith(".py") or _LIBRARY_PATH.search(frame.file):
            continue
        if innermost and (found := setters_of(frame.file, frame.line)):
            frame.setters = [clean(text) for text in found]
            if frame.facts is not None:
                frame.facts.update((key, clean(text)) for key, text in set_facts(frame.file, frame.line).items())
        innermost = False
        if later := calls_after(frame.file, frame.line):
            frame.calls_after = [clean(text) for text in later]


def _add_with_facts(frames: list[Frame], clean: Callable[[str], str]) -> None:
    """The `with` blocks each job frame that has facts is inside or entering (probe/withblocks.py):
    who holds a lock, and who waits to take it."""
    for frame in frames[:WITH_DEPTH]:
        if frame.facts is None or frame.native or not frame.line or not frame.file.endswith(".py") \
                or _LIBRARY_PATH.search(frame.file):
            continue
        for key, text in with_facts(frame.file, frame.line).items():
            frame.facts[key] = clean(text)


def job_files(procs: list[Process]) -> list[str]:
    """The job's own .py files the frames of these processes run in (no library's), in order seen."""
    out: list[str] = []
    for proc in procs:
        for thread in proc.threads:
            for frame in thread.frames:
                if (not frame.native and frame.file.endswith(".py") and not _LIBRARY_PATH.search(frame.file)
                        and frame.file not in out):
                    out.append(frame.file)
    return out


def _cwd_files(pid: int | None) -> list[str]:
    """The top-level .py files of the process's working dir (a submitted job's worker runs in its
    runtime working dir), at most MAX_CWD_FILES, by name."""
    if pid is None:
        return []
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
        names = sorted(n for n in os.listdir(cwd) if n.endswith(".py"))[:MAX_CWD_FILES]
    except OSError:
        return []
    return [os.path.join(cwd, n) for n in names]


def add_awaiting(proc: Process, title: str | None, files: list[str], clean: Callable[[str], str] | None = None) -> None:
    """For an actor whose threads show no frame of the method its title names as running (an
    async call suspended in `await` has no frame; its other threads may run job code): what that
    method of its class awaits and who sets it, read from the job's files (`files`, then its
    working dir's)."""
    cls, method = split_ray_title(title or proc.title)
    if cls and cls.startswith(SERVE_REPLICA) and not method:
        _add_remote_awaits(proc, cls.rsplit(":", 1)[-1], files, clean)
        return
    if not cls or not method or any(not f.native and f.file.endswith(".py") and not _LIBRARY_PATH.search(f.file)
                                    and f.function.rsplit(".", 1)[-1] == method
                                    for t in proc.threads for f in t.frames):
        return
    redact = clean or (lambda text: text)
    paths = [*files, *(f for f in _cwd_files(proc.pid) if f not in files)]
    for path in paths:
        found = awaited_in(path, cls, method)
        if found is not None:
            proc.awaiting = {k: ([redact(str(x)) for x in v] if isinstance(v, list) else
                                 redact(v) if isinstance(v, str) else v) for k, v in found.items()}
            return
    for path in paths:
        site = await_site(path, cls, method)
        if site is not None:
            proc.await_at = {k: ([redact(str(x)) for x in v] if isinstance(v, list) else
                                 redact(v) if isinstance(v, str) else v) for k, v in site.items()}
            return


SERVE_REPLICA = "ServeReplica:"  # a Serve replica's title: ray::ServeReplica:<app>:<deployment>


def _add_remote_awaits(proc: Process, deployment: str, files: list[str], clean: Callable[[str], str] | None) -> None:
    """For a Serve replica none of whose threads runs a method of its deployment's class (its
    requests await: a coroutine has no frame): the awaits of `.remote(` calls in that class's
    methods (the deployment's name is its class's unless renamed), read from the job's files."""
    if any(not f.native and f.file.endswith(".py") and not _LIBRARY_PATH.search(f.file)
           and f.function.split(".")[0] == deployment for t in proc.threads for f in t.frames):
        return
    redact = clean or (lambda text: text)
    for path in [*files, *(f for f in _cwd_files(proc.pid) if f not in files)]:
        found = remote_awaits(path, deployment)
        if found:
            proc.remote_awaits = [{k: redact(v) if isinstance(v, str) else v for k, v in entry.items()}
                                  for entry in found]
            return
