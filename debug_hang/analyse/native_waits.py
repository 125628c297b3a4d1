"""What native frames add to a process's reading: the thread that holds the GIL while the others
wait for it, the job's own frame in a stack without Python frames, and whether a dump shows every
thread of its process (a lock no other thread can release is then certain).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from debug_hang.model import Frame, Process, StackSource, Thread

if TYPE_CHECKING:
    from debug_hang.analyse.patterns import ThreadMatch

GIL_WAIT = "gil-wait"
# Dumpers that print every thread of the process (a traceback or a bare `bt` shows one).
_ALL_THREADS: frozenset[StackSource] = frozenset({"py-spy-text", "py-spy-text-0.1", "py-spy-json", "ray-stack", "stacks-v1",
                          "node-stacks-v1", "node-dump", "gdb", "eu-stack", "lldb", "thread-dump"})
# Native frames of the system and of runtimes, never the job's own code.
_SYSTEM_PREFIXES = ("/usr/", "/lib", "./", "../", "/build/", "/opt/conda/conda-bld/")
_SYSTEM_NAMES = ("std::", "__", "absl::", "_Py", "Py", "pthread_", "start_thread", "clone")


def shows_all_threads(proc: Process) -> bool:
    """True when the dump of `proc` lists every thread it had (faulthandler's `Stack (most
    recent call first)` and `bt` of one thread do not)."""
    if proc.source == "faulthandler":
        return bool(proc.threads) and all(t.thread_id is not None for t in proc.threads)
    if proc.source == "gdb":
        return bool(proc.threads) and all(t.os_thread_id is not None for t in proc.threads)
    return proc.source in _ALL_THREADS


def native_user_frame(natives: list[tuple[int, Frame]]) -> Frame | None:
    """In a stack without Python frames (a C++ program), the innermost frame with a source line
    outside the system's and the runtimes' files: the job's own code."""
    for _, frame in natives:
        if (frame.line is not None and frame.file and not frame.file.startswith(_SYSTEM_PREFIXES)
                and not frame.function.startswith(_SYSTEM_NAMES) and frame.function != "??"):
            return frame
    return None


def mark_gil_holder(matched: list[tuple[Thread, ThreadMatch]]) -> Thread | None:
    """When threads of a process wait for the GIL, name the thread that holds it: the one py-spy
    marks as owning the GIL, else the only thread running Python code (it has Python or
    interpreter frames) that is not waiting for it. Sets `waits_for` on the waiters' matches;
    returns the holder (None when the dump does not show it)."""
    waiters = [m for _, m in matched if m.pattern == GIL_WAIT]
    owner = next((t for t, m in matched if t.owns_gil and m.pattern != GIL_WAIT), None)
    if not waiters:
        # No native frames to show the waits: py-spy's mark of a thread that owns the GIL while
        # it is off the CPU (blocked in a C call that kept it) is the holder when other threads
        # of the process stand idle in Python code.
        idle_python = [(t, m) for t, m in matched if t is not owner and t.active is False
                       and any(not f.native for f in t.frames)]
        if owner is None or owner.active is not False or not idle_python:
            return None
        for _, match in idle_python:  # nothing in the process runs Python until the GIL is back
            match.waits_for = match.waits_for or f"the GIL, held by {_who(owner)}, once its own wait ends"
        return owner
    holder = owner
    if holder is None:
        running = [t for t, m in matched if m.pattern != GIL_WAIT and _runs_python(t)]
        holder = running[0] if len(running) == 1 else None
    if holder is None:
        return None
    for match in waiters:
        match.waits_for = f"the GIL, held by {_who(holder)}"
    return holder


def _who(thread: Thread) -> str:
    if thread.name and thread.thread_id and thread.name != thread.thread_id:
        return f"thread {thread.thread_id} ({thread.name})"
    return f"thread {thread.name or thread.thread_id or '?'}"


def _runs_python(thread: Thread) -> bool:
    return any(not f.native or f.function.startswith(("_PyEval_EvalFrame", "PyEval_EvalFrame"))
               for f in thread.frames)
