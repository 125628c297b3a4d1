"""Dump this process's threads with the standard library's faulthandler, three ways.

`--mode later`: `faulthandler.dump_traceback_later(timeout)` (a watchdog writes every thread after
the timeout, "Timeout (0:00:01)!" first). `--mode signal`: `faulthandler.register(SIGUSR1)`; the
capture script sends SIGUSR1 ("Current thread ..." marks the main thread). `--mode fatal`:
`faulthandler.enable()` then a real SIGSEGV (`faulthandler._sigsegv()`), the crash form with
"Fatal Python error". The threads are those of threads_target.py (without the spinner).
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import threads_target  # noqa: E402


def block_main(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["later", "signal", "fatal"], required=True)
    parser.add_argument("--out", required=True, help="file the dump is written to")
    parser.add_argument("--ready", default="")
    parser.add_argument("--lifetime", type=float, default=20.0)
    args = parser.parse_args()
    out = open(args.out, "w", encoding="utf-8")  # noqa: SIM115 - must stay open for faulthandler
    threads_target.start_threads(spin=False)
    time.sleep(0.5)
    if args.mode == "later":
        faulthandler.dump_traceback_later(1.0, exit=True, file=out)
    elif args.mode == "signal":
        faulthandler.register(signal.SIGUSR1, file=out, all_threads=True)
    else:
        faulthandler.enable(file=out, all_threads=True)
        faulthandler._sigsegv()  # type: ignore[attr-defined]
    if args.ready:
        with open(args.ready, "w", encoding="ascii") as fh:
            fh.write(str(os.getpid()))
    block_main(args.lifetime)


if __name__ == "__main__":
    main()
