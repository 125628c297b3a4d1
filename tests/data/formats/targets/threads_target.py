"""A process whose threads are stuck in the ways a hung job's threads get stuck.

Threads: a lock-order deadlock (`deadlock-left` / `deadlock-right`), a sleeper, a spinner
(`--spin`), a counter that keeps locals and then waits on an Event, and a thread blocked inside a
native call (libc `pause()` through ctypes). The main thread waits in `wait_for_workers`.
Writes its pid to the file named by `--ready` once every thread is in place; exits by itself
after `--lifetime` seconds so a forgotten target never outlives the capture.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import threading
import time

LOCK_A = threading.Lock()
LOCK_B = threading.Lock()
NEVER = threading.Event()
BOTH_HOLD = threading.Barrier(2)


def deadlock_left() -> None:
    with LOCK_A:
        BOTH_HOLD.wait()
        with LOCK_B:  # blocks forever: deadlock_right holds LOCK_B and wants LOCK_A
            pass


def deadlock_right() -> None:
    with LOCK_B:
        BOTH_HOLD.wait()
        with LOCK_A:  # blocks forever
            pass


def sleeper() -> None:
    while True:
        time.sleep(0.5)


def spinner() -> None:
    spins = 0
    while True:
        spins += 1


def count_then_wait(limit: int, label: str) -> None:
    counter = 0
    for _ in range(limit):
        counter += 1
    batch = {"counted": counter, "label": label}
    NEVER.wait()
    print(batch)


def native_wait() -> None:
    libc = ctypes.CDLL(None)
    libc.pause()  # ctypes releases the GIL: the thread sits in libc with a Python caller


def wait_for_workers(threads: list[threading.Thread], lifetime: float) -> None:
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline:
        threads[0].join(timeout=0.2)


def start_threads(spin: bool) -> list[threading.Thread]:
    specs: list[tuple[str, object, tuple[object, ...]]] = [
        ("deadlock-left", deadlock_left, ()),
        ("deadlock-right", deadlock_right, ()),
        ("sleeper", sleeper, ()),
        ("counter", count_then_wait, (1234, "epoch-7")),
        ("native-wait", native_wait, ()),
    ]
    if spin:
        specs.append(("spinner", spinner, ()))
    threads = [threading.Thread(target=fn, args=args, name=name, daemon=True)  # type: ignore[arg-type]
               for name, fn, args in specs]
    for t in threads:
        t.start()
    return threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ready", required=True, help="file to write the pid to when ready")
    parser.add_argument("--lifetime", type=float, default=60.0)
    parser.add_argument("--spin", action="store_true", help="add a thread that spins")
    args = parser.parse_args()
    threads = start_threads(args.spin)
    time.sleep(0.5)  # let every thread reach its blocking call
    with open(args.ready, "w", encoding="ascii") as fh:
        fh.write(str(os.getpid()))
    wait_for_workers(threads, args.lifetime)


if __name__ == "__main__":
    main()
