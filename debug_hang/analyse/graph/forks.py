"""A forked child waiting on what only a thread of its parent would do: fork copies the memory
(a queue.Queue, a Condition, Ray's client state) but only the thread that called fork. A child
whose one thread waits on a threading primitive, or in ray.get (Ray's core worker runs native
threads that exist only in the parent), waits for a thread it does not have."""

from __future__ import annotations

import re

from debug_hang.analyse.graph.builder import Builder
from debug_hang.analyse.graph.threads import deciding_thread, frame_text, other_threads_in_job_code
from debug_hang.analyse.patterns import ProcessVerdict, is_library
from debug_hang.model import Frame, Thread

# What a fork child's stack shows below its own code: the parent's frames from the fork on
# (multiprocessing's fork start method, or a bare os.fork() line of the parent).
_POPEN_FORK = re.compile(r"(^|/)multiprocessing/popen_fork\.py$")
_OS_FORK = re.compile(r"\bos\.fork\s*\(")
# A wait on a threading primitive only another thread of the same process can end (threading's
# Condition/Event, the stdlib queue.Queue built on them) - not a multiprocessing one.
_THREADING_WAIT = re.compile(r"(^|/)(threading|queue)\.py$")
_MULTIPROCESSING = re.compile(r"(^|/)multiprocessing/")
_RAY_GET = ("ray-get-wait",)
# The object a job line waits on (`self.pending.join()` -> self.pending).
_RECEIVER = re.compile(r"((?:self\.)?[A-Za-z_][\w.]*)\.(?:join|get|put|wait|wait_for|acquire)\s*\(")


def forked(thread: Thread) -> bool:
    """The thread's stack runs in a fork child: the parent's fork call is on it."""
    return any(not f.native and (f.name == "_launch" and _POPEN_FORK.search(f.file) or _OS_FORK.search(f.code or ""))
               for f in thread.frames)


def fork_lost_thread(b: Builder, parent_key: str, child_key: str) -> list[str]:
    """Why a forked child's wait cannot end, when it waits for a thread only its parent has:
    its one thread in a threading wait (Condition, Event, queue.Queue) or in ray.get, no other
    thread of the child in job code. Empty when that is not what the stacks show."""
    child, parent = b.verdicts.get(child_key), b.verdicts.get(parent_key)
    waiter = deciding_thread(child) if child is not None else None
    if child is None or parent is None or waiter is None or child.main is None or not forked(waiter) \
            or other_threads_in_job_code(child, waiter):
        return []
    frame = child.main.user_frame or child.main.frame
    alone = f"its only thread{'' if len(child.threads) == 1 else ' in job code'}"
    parent_node = b.g.nodes[parent_key]
    if child.main.pattern in _RAY_GET and parent.process.role in ("actor", "task", "driver", "worker"):
        return [f"the threads that would serve its ray.get were not inherited through fork: {alone} waits in ray.get at "
                f"{frame_text(frame)}, in a fork of the Ray worker {parent_node.label()}, whose core worker (the native "
                "threads that submit calls and receive results) runs only in the parent",
                "fork copies the memory but only the calling thread: a Ray call from a forked child never reaches the "
                "cluster and its ray.get never returns (Ray's client is not fork-safe). Fix: make the Ray call in the "
                "parent (or before the fork) and hand the child plain data, or start the child with spawn"]
    if not _in_threading_wait(waiter, frame):
        return []
    lines = [f"the thread that would release its wait was not inherited through fork: {alone} waits at {frame_text(frame)}, "
             "a threading wait (Condition, Event, queue.Queue) only another thread of the child could signal"]
    server = _server_in_parent(parent, b.deciding.get(parent_key) or deciding_thread(parent), frame)
    if server is not None:
        lines.append(f"in the parent {parent_node.label()}, thread {server[0].name or server[0].os_thread_id} serves that "
                     f"object at {frame_text(server[1])}; the child has a copy of the object, not of that thread")
    lines.append("fork copies the memory but only the thread that calls it: no thread of the child will ever signal the "
                 "wait. Fix: hand the work back to the parent (a multiprocessing.Queue or pipe), start the thread in the "
                 "child, or start the child with spawn")
    return lines


def _in_threading_wait(thread: Thread, frame: Frame | None) -> bool:
    """The frames inside the job's line are threading's or queue.Queue's wait, no multiprocessing's."""
    frames = [f for f in thread.frames if not f.native]
    inner = frames[:next((i for i, f in enumerate(frames) if f is frame), 0)]
    return bool(inner) and all(is_library(f) and not _MULTIPROCESSING.search(f.file) for f in inner) \
        and any(_THREADING_WAIT.search(f.file) for f in inner)


def _server_in_parent(parent: ProcessVerdict, forker: Thread | None, frame: Frame | None) -> tuple[Thread, Frame] | None:
    """A thread of the parent (not the one waiting on the child) whose job frame works on the object
    the child's line waits on: the same `self.X` in the same class, or the same name in the same file."""
    found = _RECEIVER.search(frame.code or "") if frame is not None else None
    if frame is None or found is None:
        return None
    receiver = found.group(1)
    owner = frame.function.rsplit(".", 1)[0] if "." in frame.function else None
    for thread, _m in parent.threads:
        if thread is forker:
            continue
        for f in thread.frames:
            if f.native or is_library(f) or f.file != frame.file or f"{receiver}." not in (f.code or ""):
                continue
            if receiver.startswith("self.") and owner and not f.function.startswith(f"{owner}."):
                continue  # another class's attribute of the same name
            return thread, f
    return None
