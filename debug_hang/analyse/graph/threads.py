"""What the threads of one process can do for each other: which thread decided its reading,
which others could set an event or fill a queue it waits on, and how frames are quoted."""

from __future__ import annotations

from debug_hang.analyse.graph.model import WaitGraph
from debug_hang.analyse.patterns import ProcessVerdict, catalog, is_library
from debug_hang.model import Frame, Process, Thread


def deciding_thread(verdict: ProcessVerdict) -> Thread | None:
    """The thread whose stack decided the process's reading."""
    return next((t for t, m in verdict.threads if m is verdict.main), None)


def other_threads_in_job_code(verdict: ProcessVerdict, thread: Thread | None) -> list[Thread]:
    """The process's other threads that could hold a lock, set an event or fill a queue `thread`
    waits on: those running the job's own code, and library threads blocked in a wait that leads
    somewhere (ray.get, a collective, a lock: alive, and part of the work). Known housekeeping
    loops and library threads merely idle on a queue or event are not."""
    cat = catalog()
    return [t for t, m in verdict.threads if t is not thread
            and (any(not is_library(f) for f in t.frames if not f.native)
                 or (m.pattern in cat and cat[m.pattern].kind != "benign" and m.pattern not in IDLE_READINGS))]


# Readings of a library thread that is idle on its own queue or event (a feeder, a logger thread).
IDLE_READINGS = frozenset({"event-wait", "queue-get-wait"})


def proc_key(proc: Process) -> str:
    return proc.ref.key


def frame_text(frame: Frame | None) -> str:
    if frame is None:
        return "?"
    where = f"{frame.short_file}:{frame.line}" if frame.line else frame.short_file
    code = f" `{frame.code}`" if frame.code else ""
    return f"{frame.function} ({where}){code}"


def reachable_from(g: WaitGraph, start: str) -> set[str]:
    """Every node `start` waits on, directly or down a chain."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for e in g.out(todo.pop()):
            if e.dst not in seen:
                seen.add(e.dst)
                todo.append(e.dst)
    return seen


def pending_timers(verdict: ProcessVerdict, thread: Thread | None) -> list[Thread]:
    """The process's other threads that wait out an interval before they call a function: a
    threading.Timer (`Timer(30, self.ready.set)`) is a setter that has not run yet, and its stack
    shows only the standard library (Timer.run waiting on its own Event, no job frame)."""
    return [t for t, _ in verdict.threads if t is not thread and _waits_out_interval(t)]


def _waits_out_interval(thread: Thread) -> bool:
    frames = [f for f in thread.frames if not f.native]
    for inner, outer in zip(frames, frames[1:], strict=False):
        if outer.name == "run" and outer.file.endswith("threading.py"):
            # Timer.run waits on its Event itself; a Thread.run's target sits between the two
            return inner.name == "wait" and inner.file.endswith("threading.py")
    return False


def cannot_signal(thread: Thread, waited_at: Frame | None) -> bool:
    """A thread that cannot set the event another thread waits on: idle at the same job line (a
    peer at the same barrier or condition), or idle in Thread.join (it moves only once a thread it
    joins ends, and the threads that could end are the ones counted elsewhere)."""
    if thread.active:
        return False
    frames = [f for f in thread.frames if not f.native]
    if any(f.name == "join" and f.file.endswith("threading.py") for f in frames):
        return True
    return waited_at is not None and any(f.file == waited_at.file and f.line == waited_at.line
                                         and f.function == waited_at.function for f in frames)


def joins(thread: Thread) -> bool:
    """The thread is idle in Thread.join (directly or through an executor's shutdown)."""
    return not thread.active and any(f.name == "join" and f.file.endswith("threading.py")
                                     for f in thread.frames if not f.native)


def job_frame(thread: Thread) -> Frame | None:
    """The thread's innermost frame of job code (not library), if any."""
    return next((f for f in thread.frames if not f.native and not is_library(f)), None)
