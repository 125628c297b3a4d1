"""A process at interpreter exit, waiting for a non-daemon thread that waits on what nobody gives.

When a Python program's main code returns, the interpreter's shutdown joins every non-daemon
thread (`threading._shutdown`, the main thread's only frame in py-spy) before it runs atexit
handlers. A non-daemon thread that waits in the process - on a queue, an event, a condition, a
lock - for something the main code (now finished) or an atexit handler (not run until the join
returns) would have given, waits forever, and so does the exit: the process never ends and
whoever waits for it (a parent in communicate(), a job) waits too. The blocked thread is the root:
its producer is gone (the main code returned); the fix is to stop it before the main code ends.

The rule fires only when, in every sample, the main thread is at `_shutdown` and the other
threads that run the job's code are idle in such an in-process wait at the same line, with no
timeout where the dump's locals or source lines show one: a thread that computes, sleeps out a timer, waits with
a timeout or reads from outside the process may still end.
"""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.inprocess import name_of, runs
from debug_hang.analyse.graph.threads import frame_text, other_threads_in_job_code, waits_with_timeout
from debug_hang.analyse.patterns import ProcessVerdict, ThreadMatch
from debug_hang.model import Frame, Process, Thread

_THREADING = re.compile(r"(^|/)threading\.py$")
# Readings of a thread that waits on another thread of its own process (nothing outside).
IN_PROCESS_WAITS = frozenset({"queue-get-wait", "event-wait", "lock-wait"})


def at_exit(thread: Thread) -> bool:
    """The main thread inside interpreter shutdown's join of non-daemon threads."""
    frames = [f for f in thread.frames if not f.native]
    return bool(frames) and frames[0].name == "_shutdown" and bool(_THREADING.search(frames[0].file)) \
        and all(_THREADING.search(f.file) for f in frames)


def exit_blocked(verdict: ProcessVerdict, info: dict[str, object] | None = None) -> tuple[Thread, list[tuple[Thread, ThreadMatch]]] | None:
    """The exiting main thread and the threads its join waits for, each idle in an in-process
    wait; None unless every other thread of the job's code is such a thread."""
    main = next((t for t, _m in verdict.threads if at_exit(t)), None)
    if main is None:
        return None
    others = other_threads_in_job_code(verdict, main)
    blocked = [(t, m) for t, m in verdict.threads if t is not main and any(t is o for o in others)]
    if not blocked or any(m.pattern not in IN_PROCESS_WAITS or runs(t, info) or waits_with_timeout(t) for t, m in blocked):
        return None
    return main, blocked


def _line(match: ThreadMatch) -> Frame | None:
    return match.user_frame or match.frame


def _same_in(sample: Process, main: Thread, blocked: list[tuple[Thread, ThreadMatch]]) -> bool:
    by_id = {t.os_thread_id or t.thread_id: t for t in sample.threads}
    then = by_id.get(main.os_thread_id or main.thread_id)
    if then is None or not at_exit(then):
        return False
    for thread, match in blocked:
        was = by_id.get(thread.os_thread_id or thread.thread_id)
        line = _line(match)
        if was is None or line is None or not any(f.file == line.file and f.line == line.line for f in was.frames):
            return False
    return True


@graph_pass(after=("follow_threads",), decides=("exit-join-blocked",))
def detect_exit_joins(b: Builder) -> None:
    """A process whose main thread is at interpreter exit joining non-daemon threads that each
    wait, in every sample, on something only the finished main code or an atexit handler would give."""
    for key, verdict in b.verdicts.items():
        ref = verdict.process.ref
        found = exit_blocked(verdict, b.inp.info.get(ref))
        samples = b.inp.samples.get(ref) or []
        if found is None or len(samples) < 2 or not all(_same_in(s, *found) for s in samples):
            continue
        main, blocked = found
        node = b.g.nodes[key]
        thread, match = blocked[0]
        node.pattern, node.state = "exit-join-blocked", "blocked"
        node.frame, node.user_frame = match.frame, match.user_frame
        b.deciding[key] = thread
        node.evidence.append(
            f"thread {name_of(main)} is in threading._shutdown: the main code has returned and the interpreter, "
            "exiting, joins every non-daemon thread before it runs the atexit handlers")
        for other, m in blocked[:4]:
            node.evidence.append(
                f"  it waits for thread {name_of(other)}, idle in {m.pattern} at {frame_text(_line(m))}: what it "
                "waits for would come from the main code, which has finished, or from an atexit handler, which "
                "runs only after this join")
        node.evidence.append(f"the same in all {len(samples)} samples: the process cannot exit")
