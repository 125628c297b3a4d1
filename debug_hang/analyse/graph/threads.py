"""What the threads of one process can do for each other: which thread decided its reading,
which others could set an event or fill a queue it waits on, and how frames are quoted."""

from __future__ import annotations

import re

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


# The timed branch of the standard library's blocking waits: Condition.wait (under Event.wait,
# Queue.get/put, Semaphore.acquire and Barrier.wait given a timeout) calls
# `waiter.acquire(True, timeout)` only when it was given one; `waiter.acquire()` otherwise.
_TIMED_CONDITION = re.compile(r"\bacquire\(\s*True\s*,\s*timeout\s*\)")
# A job line that passes a timeout to the call it waits in (a C-level wait such as
# `lock.acquire(timeout=5)` has no frame of its own): `timeout=` not None, or `.wait(45)`.
_TIMED_CALL = re.compile(r"\.(?:wait|get|put|acquire|join|result)\([^()]*\btimeout\s*=\s*(?!None\b)[^\s,)]"
                         r"|\.(?:wait|join)\(\s*\d+(?:\.\d*)?\s*\)")


def timed_wait(thread: Thread) -> Frame | None:
    """The frame whose source shows that `thread`'s wait has a timeout, if one does: such a wait
    returns by itself when the timeout runs out, so no window shorter than it shows that the wait
    never ends (`stop.wait(timeout=45)` is a ticker's sleep). None when the wait is untimed or its
    source was not read."""
    frames = [f for f in thread.frames if not f.native]
    if not frames:
        return None
    inner = frames[0]
    if inner.file.endswith("threading.py") and inner.function.endswith("Condition.wait") and inner.code:
        return inner if _TIMED_CONDITION.search(inner.code) else None
    job = next((f for f in frames if not is_library(f)), None)
    if job is not None and job.code and _TIMED_CALL.search(job.code):
        return job
    return None


# A `timeout` local that means "no timeout" (None; -1 is Thread.join's and Lock.acquire's "forever").
_NO_TIMEOUT = (None, "None", -1, "-1")


def waits_with_timeout(thread: Thread) -> bool:
    """The thread's wait has a timeout, so it wakes by itself: its source shows one (timed_wait),
    or, in a dump with locals, a library frame above the job's code has a `timeout` local that is
    set (or `block=False`)."""
    if timed_wait(thread) is not None:
        return True
    for frame in (f for f in thread.frames if not f.native):
        if not is_library(frame):
            return False
        facts = frame.facts or {}
        if facts.get("timeout") not in _NO_TIMEOUT or facts.get("block", True) is False:
            return True
    return False


def timed_wait_text(where: str, timed: Frame) -> str:
    """Evidence for a wait that has a timeout (timed_wait)."""
    return (f"waits at {where} with a timeout (`{timed.code}`, {timed.short_file}:{timed.line}): the wait returns by "
            "itself when the timeout runs out, so a window shorter than it cannot show that it never ends; what the "
            "code does after it decides (a ticker or a poll waits like this between its rounds)")


def pending_timers(verdict: ProcessVerdict, thread: Thread | None) -> list[Thread]:
    """The process's other threads that wait out an interval before they call a function: a
    threading.Timer (`Timer(30, self.ready.set)`) is a setter that has not run yet, and its stack
    shows only the standard library (Timer.run waiting on its own Event, no job frame)."""
    return [t for t, _ in verdict.threads if t is not thread and _waits_out_interval(t)]


_TIMER_CALL = re.compile(r"\bTimer\(\s*[^,()]+(?:\([^()]*\))?\s*,\s*(?P<fn>[\w.]+)\s*[,)]")
_WAITS_ON = re.compile(r"(?P<obj>[\w.]+)\.wait\(")


def timer_release(timers: list[Thread], waited_at: Frame | None) -> str:
    """How a wait is released by the process's pending threading.Timer threads (`pending_timers`):
    within the longest interval they wait out (their Event.wait `timeout`, when locals were read),
    and, when the waiting frame's source arms a Timer whose function is the `set` of the object it
    waits on (`Timer(120, self.ready.set)` beside `self.ready.wait()`), that line. A scheduled
    release, not a missing setter."""
    intervals = [float(v) for t in timers for f in t.frames
                 if not f.native and f.name == "wait" and f.file.endswith("threading.py") and isinstance(f.facts, dict)
                 and isinstance(v := f.facts.get("timeout"), (int, float)) and not isinstance(v, bool)]
    within = f" in ≤{max(intervals):.3g} s" if intervals else " once its interval runs out"
    names = ", ".join(str(t.name or t.os_thread_id) for t in timers)
    armed = ""
    waited = _WAITS_ON.search(waited_at.code or "") if waited_at is not None else None
    if waited_at is not None and waited is not None:
        for line in waited_at.context or []:
            found = _TIMER_CALL.search(line)
            if found and found["fn"] == f"{waited['obj']}.set":
                number, _, text = line.partition(":")
                armed = f"; `{text.strip()[:100]}` (line {number.strip()}) arms it to set `{waited['obj']}`, the Event this wait is on"
                break
    if not armed:
        armed = " (most likely this wait's setter: the line that arms it was not in the source read)"
    return (f"released by a timer{within}: thread(s) {names} of this process wait out a threading.Timer's interval "
            f"and then call its function{armed}")


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


# A loop whose test is the wait itself (`while not self.ready.wait(5):`,
# `while not cond.wait_for(pred, timeout=5):`): its timeout ends one round, never the loop.
_REWAIT_TEST = re.compile(r"^(?P<indent>\s*)while\s+not\s+[\w.\[\]]+\.wait(?:_for)?\(")
# Statements that change nothing the wait tests: a log line, a pass, a continue.
_HEARTBEAT_STMT = re.compile(r"^(?:print\(|(?:self\.)?(?:_?log(?:ger)?|logging|warnings)\.\w+\(|pass\b|continue\b)")
_NUMBERED = re.compile(r"^(?P<no>\d+):\s?(?P<code>.*)$")


def rewait_loop(thread: Thread) -> Frame | None:
    """The job frame whose line is a loop that only waits again when its timed wait times out:
    its test is the wait (`while not X.wait(timeout):`) and its body, read whole from the
    frame's source context, only logs (print, a logger call, pass, continue). Such a loop returns
    only when the wait is signalled - its timeout is a heartbeat, not an end - so the wait is as
    untimed as `X.wait()`. None when the line is no such loop or its body is not seen whole."""
    frame = job_frame(thread)
    if frame is None or frame.line is None or not frame.context:
        return None
    lines: list[tuple[int, str]] = []
    for text in frame.context:
        m = _NUMBERED.match(text)
        if m:
            lines.append((int(m.group("no")), m.group("code")))
    at = next((i for i, (no, _c) in enumerate(lines) if no == frame.line), None)
    if at is None:
        return None
    test = _REWAIT_TEST.match(lines[at][1])
    if test is None or not lines[at][1].rstrip().endswith(":"):
        return None
    indent, body, depth = len(test.group("indent")), 0, 0
    for _no, code in lines[at + 1:]:
        if not code.strip() or code.strip().startswith("#"):
            continue
        if depth == 0 and len(code) - len(code.lstrip()) <= indent:
            return frame if body else None  # the loop ended inside the context: its body is whole
        if depth == 0 and not _HEARTBEAT_STMT.match(code.strip()):
            return None  # the body does work: a ticker between its rounds
        body += 1
        depth = max(0, depth + code.count("(") + code.count("[") - code.count(")") - code.count("]"))
    return None
