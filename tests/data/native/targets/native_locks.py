"""Real hangs below Python, for recording native backtraces (gdb, eu-stack, lldb, py-spy --native).

Each mode blocks for good in a C function reached through ctypes; the program writes its pid to
--ready once every thread is where it will stay, then waits to be dumped and killed.

  mutex     two threads take two libc pthread mutexes in opposite order (native lock-order
            deadlock); a third takes its own non-recursive mutex twice (self-deadlock)
  cond      a thread in pthread_cond_wait that nobody will ever signal
  gil       a GIL deadlock: `c-extension` calls pthread_mutex_lock through ctypes.PyDLL, which
            keeps the GIL, on a mutex `holder` took through ctypes.CDLL; `holder` then needs the GIL
            back to run Python and waits for it forever, and so does every other thread
  fork      a thread holds a libc mutex while the main thread forks; the child takes the mutex,
            whose owner does not exist in the child (fork-after-threads); --ready gets the child's pid
  pylock    the same with a threading.Lock held by another thread at os.fork()
  exit      a thread holds the lock of a library (--library, teardown_lock.c) when the main thread
            forks; the child's exit() runs the library's destructor, which waits for that lock
            (__run_exit_handlers); --ready gets the child's pid
  dlopen-gil  ctypes.CDLL(--library) in a thread: CPython 3.11 keeps the GIL across dlopen(), and the
            library's constructor never returns, so every other thread waits for the GIL
  sleep     a thread in libc sleep() holding the GIL (ctypes.PyDLL): the others wait for the GIL
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import os
import signal
import sys
import threading
import time

LIBC = ctypes.CDLL("libc.so.6", use_errno=True)        # calls release the GIL
LIBC_GIL = ctypes.PyDLL("libc.so.6", use_errno=True)   # calls keep the GIL
MUTEX_SIZE = 40      # sizeof(pthread_mutex_t) on x86_64 glibc
COND_SIZE = 48       # sizeof(pthread_cond_t)


def new_mutex() -> ctypes.Array[ctypes.c_char]:
    m = ctypes.create_string_buffer(MUTEX_SIZE)
    LIBC.pthread_mutex_init(m, None)   # PTHREAD_MUTEX_NORMAL: not recursive, no owner check
    return m


def lock(m: ctypes.Array[ctypes.c_char]) -> None:
    LIBC.pthread_mutex_lock(m)


def ready(path: str, pid: int) -> None:
    with open(path + ".tmp", "w") as fh:
        fh.write(str(pid))
    os.replace(path + ".tmp", path)


def mode_mutex(path: str) -> None:
    a, b, c = new_mutex(), new_mutex(), new_mutex()
    gate = threading.Barrier(2)

    def left() -> None:
        lock(a)
        gate.wait()
        lock(b)              # right holds b

    def right() -> None:
        lock(b)
        gate.wait()
        lock(a)              # left holds a

    def relock() -> None:
        lock(c)
        lock(c)              # a NORMAL mutex taken twice by its owner

    threads = [threading.Thread(target=f, name=f.__name__) for f in (left, right, relock)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    ready(path, os.getpid())
    for t in threads:
        t.join()


def mode_cond(path: str) -> None:
    m = new_mutex()
    cond = ctypes.create_string_buffer(COND_SIZE)
    LIBC.pthread_cond_init(cond, None)

    def wait_for_signal() -> None:
        lock(m)
        LIBC.pthread_cond_wait(cond, m)   # nobody calls pthread_cond_signal

    t = threading.Thread(target=wait_for_signal, name="cond-waiter")
    t.start()
    time.sleep(1.0)
    ready(path, os.getpid())
    t.join()


def mode_gil(path: str) -> None:
    m = new_mutex()
    taken = threading.Event()

    def holder() -> None:
        lock(m)              # CDLL: the GIL is released during the call, taken back after
        taken.set()
        while True:
            time.sleep(0.2)  # needs the GIL back after each sleep

    def c_extension() -> None:
        taken.wait()
        LIBC_GIL.pthread_mutex_lock(m)   # PyDLL: blocks in C with the GIL held

    def ticker() -> None:
        n = 0
        while True:
            n += 1
            time.sleep(0.1)

    for f, name in ((holder, "holder"), (ticker, "ticker")):
        threading.Thread(target=f, name=name, daemon=True).start()
    taken.wait()
    time.sleep(0.5)
    ready(path, os.getpid())  # written before the GIL is gone for good: nothing runs Python after
    threading.Thread(target=c_extension, name="c-extension", daemon=True).start()
    while True:
        time.sleep(1)


def mode_fork(path: str) -> None:
    m = new_mutex()
    taken = threading.Event()

    def holder() -> None:
        lock(m)
        taken.set()
        while True:
            time.sleep(1)    # keeps the mutex for the life of the parent

    threading.Thread(target=holder, name="holder", daemon=True).start()
    taken.wait()
    pid = os.fork()
    if pid == 0:             # the child: one thread, a copy of the mutex, locked by nobody alive
        lock(m)
        os._exit(0)
    time.sleep(1.0)
    ready(path, pid)
    os.waitpid(pid, 0)


def mode_pylock(path: str) -> None:
    guard = threading.Lock()
    taken = threading.Event()

    def holder() -> None:
        with guard:
            taken.set()
            while True:
                time.sleep(1)

    threading.Thread(target=holder, name="holder", daemon=True).start()
    taken.wait()
    pid = os.fork()
    if pid == 0:
        with guard:          # copied locked: its holder thread is not in the child
            os._exit(0)
    time.sleep(1.0)
    ready(path, pid)
    os.waitpid(pid, 0)


def mode_exit(path: str, library: str) -> None:
    lib = ctypes.CDLL(library)

    threading.Thread(target=lib.registry_update_forever, name="registry", daemon=True).start()
    time.sleep(0.5)
    pid = os.fork()
    if pid == 0:
        sys.exit(0)   # exit() runs the library's destructor, which waits for the registry lock
    time.sleep(1.0)
    ready(path, pid)
    os.waitpid(pid, 0)


def mode_dlopen_gil(path: str, library: str) -> None:
    def load_plugin() -> None:
        ctypes.CDLL(library)   # CPython 3.11's ctypes keeps the GIL across dlopen: never returns

    ready(path, os.getpid())   # before the GIL is gone for good
    threading.Thread(target=load_plugin, name="plugin-loader", daemon=True).start()
    while True:
        time.sleep(1)


def mode_sleep(path: str) -> None:
    def blocking_call() -> None:
        LIBC_GIL.sleep(100000)          # C code that blocks without releasing the GIL

    def worker() -> None:
        while True:
            sum(range(1000))
            time.sleep(0.01)

    threading.Thread(target=worker, name="worker", daemon=True).start()
    time.sleep(0.3)
    ready(path, os.getpid())  # before the GIL is gone for good
    threading.Thread(target=blocking_call, name="blocking-call", daemon=True).start()
    while True:
        time.sleep(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["mutex", "cond", "gil", "fork", "pylock", "exit", "dlopen-gil", "sleep"])
    p.add_argument("--ready", required=True, help="file the pid to dump is written to")
    p.add_argument("--faulthandler", help="file faulthandler writes every thread to on SIGUSR1")
    p.add_argument("--library", help="exit and dlopen-gil modes: the library to load")
    args = p.parse_args()
    if args.faulthandler:
        faulthandler.register(signal.SIGUSR1, file=open(args.faulthandler, "w"), all_threads=True)
    if args.mode in ("exit", "dlopen-gil"):
        (mode_exit if args.mode == "exit" else mode_dlopen_gil)(args.ready, args.library)
    else:
        globals()[f"mode_{args.mode}"](args.ready)


if __name__ == "__main__":
    sys.exit(main())
