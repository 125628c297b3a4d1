"""What the node probe's kernel-object readings (node_probe.add_kernel_object_waits) add per node.

Starts `--targets` Python processes of a few threads each, as a node's dumped workers (idle in a
Condition wait, as Ray's worker threads are), then times the reading on them in three cases:
nothing to find; one of them blocked opening a FIFO (the node-wide descriptor walk); one in
SQLite's busy handler behind another process's open transaction (its descriptors matched to
/proc/locks); one reading an empty os.pipe() (the node-wide walk for the holders of its
write end). Prints the median of `--repeat` runs, in milliseconds, and the node's process count.

    python benchmarks/bench_kernel_objects.py [--targets 32] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from debug_hang.probe.node_probe import add_kernel_object_waits
from debug_hang.redact import Redactor

IDLE = ("import threading\nfor _ in range(3):\n    threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "threading.Event().wait()\n")
HOLD = ("import sqlite3, sys, time\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('CREATE TABLE t (a)'); c.execute('BEGIN IMMEDIATE'); c.execute('INSERT INTO t VALUES (1)')\n"
        "print('held', flush=True); time.sleep(600)\n")
RETRY = "import sqlite3, sys\nsqlite3.connect(sys.argv[1], timeout=600).execute('INSERT INTO t VALUES (2)')\n"
PIPE = "import os\nr, w = os.pipe()\nos.read(r, 4)\n"


def as_dumped(pids: list[int]) -> list[dict[str, Any]]:
    """The probe's last sample of each process, as far as the reading looks: its threads' ids."""
    return [{"pid": pid, "sample": 1, "threads": [{"os_thread_id": int(t)} for t in os.listdir(f"/proc/{pid}/task")]}
            for pid in pids]


def timed(pids: list[int], repeat: int) -> tuple[float, dict[int, dict[str, Any]]]:
    runs, info = [], {}
    for _ in range(repeat):
        info = {pid: {} for pid in pids}
        start = time.perf_counter()
        add_kernel_object_waits(info, as_dumped(pids), Redactor())
        runs.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(runs), info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    started: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            idle = [subprocess.Popen([sys.executable, "-c", IDLE], text=True) for _ in range(args.targets)]
            started += idle
            time.sleep(1.0)
            pids = [p.pid for p in idle]
            base, _ = timed(pids, args.repeat)
            fifo = Path(tmp, "x.fifo")
            os.mkfifo(fifo)
            opener = subprocess.Popen([sys.executable, "-c", f"open({str(fifo)!r}).read()"], text=True)
            holder = subprocess.Popen([sys.executable, "-c", HOLD, str(Path(tmp, "t.db"))], stdout=subprocess.PIPE, text=True)
            started += [opener, holder]
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            retry = subprocess.Popen([sys.executable, "-c", RETRY, str(Path(tmp, "t.db"))], text=True)
            started.append(retry)
            time.sleep(1.0)
            with_fifo, info = timed(pids + [opener.pid], args.repeat)
            assert info[opener.pid].get("fifo_opens"), "the FIFO open was not read"
            with_sqlite, info = timed(pids + [retry.pid], args.repeat)
            assert info[retry.pid].get("lock_polls"), "the lock retried was not read"
            reader = subprocess.Popen([sys.executable, "-c", PIPE], text=True)
            started.append(reader)
            time.sleep(1.0)
            with_pipe, info = timed(pids + [reader.pid], args.repeat)
            assert info[reader.pid].get("pipe_reads"), "the pipe read was not read"
        finally:
            for proc in started:
                proc.kill()
                proc.wait()
    processes = sum(e.isdigit() for e in os.listdir("/proc"))
    print(f"{args.targets} targets, {processes} processes on the node (median of {args.repeat}):")
    print(f"  nothing to find      {base:7.2f} ms")
    print(f"  + a FIFO open        {with_fifo:7.2f} ms")
    print(f"  + an SQLite retry    {with_sqlite:7.2f} ms")
    print(f"  + a pipe read        {with_pipe:7.2f} ms")


if __name__ == "__main__":
    main()
