"""A hung Python program that dumps its own threads the ways people write it, on SIGUSR1.

Threads: `left`/`right` deadlock on two threading.Locks taken in opposite order, `consumer` waits
in queue.Queue.get for an item nobody puts, `waiter` in Event.wait for an event nobody sets, and
the main thread joins them. --recipe picks the dumper that runs on SIGUSR1 (into --faulthandler FILE):

  faulthandler        faulthandler.dump_traceback(all_threads=True)
  stack-only          faulthandler.dump_traceback(all_threads=False) from the signal (main thread)
  print-stack         traceback.print_stack() in the handler: the main thread, no header
  hash-thread         the classic recipe: `# Thread: name(id)`, `File: "f", line N, in func`, code
  format-list         `thread <Thread(...)>:` then traceback.format_list(extract_stack(frame))
  dashes              `-- Thread ID: N ---` then traceback.format_stack(frame)
  hex-ids             `Thread 0x7f.. (name):` then traceback.print_stack(frame)
  logging             logging.error("Thread %s (%d):\\n%s") with an asctime/levelname/name prefix
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import queue
import signal
import sys
import threading
import time
import traceback
from typing import Any, TextIO

lock_a = threading.Lock()
lock_b = threading.Lock()
items: queue.Queue[int] = queue.Queue()
never = threading.Event()


def left() -> None:
    with lock_a:
        time.sleep(0.3)
        with lock_b:
            pass


def right() -> None:
    with lock_b:
        time.sleep(0.3)
        with lock_a:
            pass


def consume() -> None:
    items.get()


def wait_for_flag() -> None:
    never.wait()


def names() -> dict[int, threading.Thread]:
    return {t.ident: t for t in threading.enumerate() if t.ident is not None}


def hash_thread(out: TextIO) -> None:
    """The classic recipe, with its own %-formatting."""
    threads = names()
    code = []
    for tid, stack in sys._current_frames().items():
        t = threads.get(tid)
        code.append("\n# Thread: %s(%d)" % (t.name if t else "", tid))  # noqa: UP031
        for filename, lineno, name, line in traceback.extract_stack(stack):
            code.append('File: "%s", line %d, in %s' % (filename, lineno, name))  # noqa: UP031
            if line:
                code.append("  %s" % (line.strip()))  # noqa: UP031
    out.write("\n".join(code) + "\n")


def format_list(out: TextIO) -> None:
    threads = names()
    for tid, stack in sys._current_frames().items():
        out.write(f"thread {threads.get(tid)}:\n")
        out.write("".join(traceback.format_list(traceback.extract_stack(stack))) + "\n")


def dashes(out: TextIO) -> None:
    for tid, stack in sys._current_frames().items():
        out.write(f"\n-- Thread ID: {tid} ---\n")
        out.write("".join(traceback.format_stack(stack)))


def hex_ids(out: TextIO) -> None:
    threads = names()
    for tid, stack in sys._current_frames().items():
        t = threads.get(tid)
        out.write(f"Thread {hex(tid)} ({t.name if t else '?'}):\n")
        traceback.print_stack(stack, file=out)
        out.write("\n")


def log_threads(out: TextIO) -> None:
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger("watchdog")
    log.addHandler(handler)
    threads = names()
    for tid, stack in sys._current_frames().items():
        t = threads.get(tid)
        log.error("Thread %s (%d):\n%s", t.name if t else "?", tid, "".join(traceback.format_stack(stack)).rstrip())
    handler.flush()


RECIPES = {
    "faulthandler": lambda out: faulthandler.dump_traceback(file=out, all_threads=True),
    "stack-only": lambda out: faulthandler.dump_traceback(file=out, all_threads=False),
    "print-stack": lambda out: traceback.print_stack(file=out),
    "hash-thread": hash_thread,
    "format-list": format_list,
    "dashes": dashes,
    "hex-ids": hex_ids,
    "logging": log_threads,
}


def dump(recipe: str, out: TextIO) -> None:
    RECIPES[recipe](out)
    out.flush()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", default="faulthandler")
    p.add_argument("--ready", required=True)
    p.add_argument("--faulthandler", required=True, help="file the dump is written to on SIGUSR1")
    args = p.parse_args()
    out = open(args.faulthandler, "w")

    def on_signal(signum: int, frame: Any) -> None:
        dump(args.recipe, out)

    signal.signal(signal.SIGUSR1, on_signal)
    threads = [threading.Thread(target=f, name=n) for f, n in
               ((left, "left"), (right, "right"), (consume, "consumer"), (wait_for_flag, "waiter"))]
    for t in threads:
        t.start()
    time.sleep(1.0)
    with open(args.ready, "w") as fh:
        fh.write(str(os.getpid()))
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
