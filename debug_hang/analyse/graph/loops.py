"""A thread waiting on a coroutine it submitted to an event loop (run_coroutine_threadsafe): which
thread runs that loop, if any.

`asyncio.run_coroutine_threadsafe(coro, loop)` schedules `coro` on `loop` and returns a
concurrent.futures.Future, completed only while a thread runs `loop`. A thread in that Future's
`result()` waits on the loop's thread: an idle loop (the coroutine awaits) or a blocked one (a
sync call inside it: async-loop-blocked) is followed by the in-process edges (inprocess.py). When
no other thread of the process runs an event loop at all - the dump shows every thread - the loop
the Future belongs to is not running (async-loop-not-running): its thread was never started, or
ended. The waiter may run a loop of its own (a sync method of a Ray async actor runs on the actor's
loop thread) and blocks it while it waits; that loop is the Future's only when the code passed the
running loop (`get_running_loop()` / `get_event_loop()` on that thread): then it blocks the loop
that would run the coroutine, and async-loop-blocked stands.

An async actor's call may hand its work to a thread of its class and await a Future that thread
resolves by posting to a loop (`self._loop.call_soon_threadsafe(fut.set_result, x)`): read from
the class's source on the node (`Process.awaiting`: the method puts into `self.Q`, then awaits a
plain name; the class posts to `self._loop`, made with `asyncio.new_event_loop()`). A loop made so
is a new loop: Ray runs its calls on loops of its own ("AsyncIO Thread: <group>" threads), so that
loop runs only on a thread the job starts. When no other thread runs a loop, the posts sit in a
loop nothing runs and the calls stay at their await (async-loop-not-running, culprit the line
that makes the loop).
"""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.inprocess import is_event_loop, name_of, python_frames
from debug_hang.analyse.graph.threads import deciding_thread, frame_text
from debug_hang.analyse.native_waits import shows_all_threads
from debug_hang.analyse.patterns import ProcessVerdict, is_library
from debug_hang.model import Frame, Thread

_FUTURES = re.compile(r"concurrent/futures/_base\.py$")
_SUBMIT = re.compile(r"\brun_coroutine_threadsafe\s*\(")
# The loop passed is the one the calling thread runs: the waiter blocks the loop of its own coroutine.
_RUNNING_LOOP = re.compile(r"\brun_coroutine_threadsafe\s*\(.*\b(get_running_loop|get_event_loop)\s*\(\s*\)")
_LINE_NO = re.compile(r"^\s*(\d+):\s?(.*)$")


@graph_pass(after=("follow_threads",), decides=("async-loop-not-running",))
def detect_loop_not_running(b: Builder) -> None:
    """A process whose deciding thread waits on a run_coroutine_threadsafe Future while no other
    thread of the process runs an event loop: the Future's loop is not running."""
    for key, verdict in b.verdicts.items():
        thread = b.deciding.get(key) or deciding_thread(verdict)
        if thread is None or thread.active or not shows_all_threads(verdict.process):
            continue
        if _posts_to_a_loop_no_thread_runs(b, key, verdict):
            continue
        job = _submitted_wait(thread)
        if job is None:
            continue
        frame, submit = job
        if any(_may_run_a_loop(t) for t, _m in verdict.threads if t is not thread):
            continue  # a loop runs in another thread: the in-process edges follow it there
        own = is_event_loop(thread)
        if own and _RUNNING_LOOP.search(submit):
            continue  # the waiter runs the very loop it submitted to: it blocks it (async-loop-blocked)
        node = b.g.nodes[key]
        node.pattern, node.state = "async-loop-not-running", "blocked"
        node.frame, node.user_frame = thread.frames[0] if thread.frames else frame, frame
        b.deciding[key] = thread
        node.evidence.append(
            f"thread {name_of(thread)} waits in Future.result at {frame_text(frame)} on a coroutine submitted with "
            f"`{submit.strip()[:120]}`: the Future is completed only while a thread runs that loop")
        node.evidence.append(
            f"no other thread of the process runs an event loop (the dump shows all {len(verdict.threads)} threads; "
            "none is in BaseEventLoop.run_forever / _run_once or a loop's select, nor runs a target py-spy cannot show, "
            "as a loop written in C does): the loop it submitted to is not running - the thread meant to run it was "
            "never started, or it ended")
        if own:
            node.evidence.append(
                f"thread {name_of(thread)} itself runs an event loop (it is called from BaseEventLoop._run_once) and "
                "blocks it while it waits, but the coroutine went to the loop passed to run_coroutine_threadsafe, "
                "not to this running one (it was not get_running_loop()/get_event_loop()): that loop has no thread")


_THREADING = re.compile(r"(^|/)threading\.py$")
# Ray runs an async actor's calls on loops of its own, one thread per concurrency group, named so
# by Ray's core worker.
_RAY_LOOP_THREAD = re.compile(r"^AsyncIO Thread: ")
_ENTRY = re.compile(r"^(?P<where>[\w.<>]+):(?P<line>\d+) (?P<text>.+)$")


def _posts_to_a_loop_no_thread_runs(b: Builder, key: str, verdict: ProcessVerdict) -> bool:
    """An async actor whose RUNNING calls, suspended with no frame, handed their work to a thread
    of the class (a put into `self.Q`) and await a plain Future, while the class resolves those
    Futures by posting to `self.X` made with new_event_loop(), and no thread but Ray's own loop
    threads runs an event loop: the posts go to a loop nothing runs. True when decided."""
    facts = verdict.process.awaiting
    if not isinstance(facts, dict) or not facts.get("pending") or not facts.get("posts"):
        return False
    loops = [m for m in (_ENTRY.match(str(x)) for x in facts.get("loops") or []) if m]
    posts = [m for m in (_ENTRY.match(str(x)) for x in facts.get("posts") or []) if m]
    method = str(facts.get("method") or "")
    running = [t for t in b.running.get(key, []) if _tail(str(t.name)) == _tail(method)]
    if not loops or not posts or not running:
        return False
    threads = [t for t, _m in verdict.threads]
    if any(_may_run_a_loop(t) and not _RAY_LOOP_THREAD.match(str(t.name or "")) for t in threads):
        return False  # a thread of the job runs a loop: it may be that one
    if not any(_RAY_LOOP_THREAD.match(str(t.name or "")) for t in threads):
        return False  # not read as a Ray async actor: whose loop runs its calls is not known
    made, post = loops[0], posts[0]
    short = str(facts.get("file", "")).rsplit("/", 1)[-1]
    pending = ", ".join(str(x) for x in facts.get("pending") or [])
    puts = ", ".join(str(x) for x in facts.get("puts") or [])
    node = b.g.nodes[key]
    node.pattern, node.state = "async-loop-not-running", "blocked"
    frame = Frame(function=made.group("where"), file=str(facts.get("file") or ""), line=int(made.group("line")),
                  code=made.group("text"))
    node.frame = node.user_frame = frame
    node.evidence.append(
        f"{len(running)} call(s) of {_tail(method)} RUNNING with no frame on any thread (coroutines suspended in await): "
        f"its source puts into {puts} and then awaits {pending} ({short}), and the class resolves them by posting to "
        f"{post.group('text')} at {short}:{post.group('line')} ({post.group('where')})")
    node.evidence.append(
        f"{made.group('text')!r} at {short}:{made.group('line')} ({made.group('where')}) makes a new loop: Ray runs the "
        "actor's calls on loops of its own (" + ", ".join(str(t.name) for t in threads if _RAY_LOOP_THREAD.match(str(t.name or "")))
        + f"), and no other thread of the process runs an event loop (the dump shows all {len(threads)} threads): "
        "nothing runs the loop the wake-ups are posted to, so the awaits never return — post to the Future's own loop "
        "(fut.get_loop().call_soon_threadsafe, or asyncio.get_running_loop() read in the async method)")
    return True


def _tail(name: str) -> str:
    return ".".join(name.split(".")[-2:])


def _may_run_a_loop(thread: Thread) -> bool:
    """An event loop's thread, or one whose innermost Python frame is `Thread.run`: its target is
    native code py-spy shows no frame of (uvloop's run_forever, written in C, looks like that)."""
    frames = python_frames(thread)
    return is_event_loop(thread) or (bool(frames) and frames[0].name == "run" and bool(_THREADING.search(frames[0].file)))


def _submitted_wait(thread: Thread) -> tuple[Frame, str] | None:
    """The job frame that waits in concurrent.futures' Future.result on a Future it got from
    run_coroutine_threadsafe (the call in its line or in the lines above it), and that call's line."""
    frames = python_frames(thread)
    at = next((i for i, f in enumerate(frames) if _FUTURES.search(f.file) and f.name in ("result", "exception")), None)
    if at is None or not all(is_library(f) for f in frames[:at]):
        return None
    job = next((f for f in frames[at + 1:] if not is_library(f)), None)
    if job is None:
        return None
    lines = [job.code or ""] + _lines_up_to(job)
    submit = next((line for line in lines if _SUBMIT.search(line)), None)
    return (job, submit) if submit is not None else None


def _lines_up_to(frame: Frame) -> list[str]:
    """The numbered source lines read around `frame` up to its own line, nearest first."""
    found: list[tuple[int, str]] = []
    for text in frame.context or []:
        match = _LINE_NO.match(text)
        if match and frame.line is not None and int(match.group(1)) <= frame.line:
            found.append((int(match.group(1)), match.group(2)))
    return [text for _n, text in sorted(found, reverse=True)]
