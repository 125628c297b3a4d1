"""Adversarial inputs for the stack parsers: shapes that cost quadratic time,
deep recursion or repeated JSON decoding in a naive parser. Each maker takes a size n (spaces,
lines or repetitions) and returns the text. Used by bench_parse.py --adversarial (time bounds)
and tests/test_pastes.py (correctness under hypothesis)."""

from __future__ import annotations

from collections.abc import Callable

SHAPES: dict[str, Callable[[int], str]] = {
    # long whitespace runs inside lines each format's pattern reads
    "spaces-frame": lambda n: 'Thread 1 (idle): "a"\n    f' + " " * n + "x (a.py:1)\n",
    "spaces-process": lambda n: "Process 1: t" + " " * n + "x\n",
    "spaces-faulthandler": lambda n: ('Thread 0x1 (most recent call first):\n  File "a.py", line 1 in f'
                                      + " " * n + "x\n"),
    "spaces-traceback": lambda n: ('Traceback (most recent call last):\n  File "a.py", line 1, in f'
                                   + " " * n + "x\n"),
    "spaces-stack-dump": lambda n: "Stack dump for x" + " " * n + "y\n",
    "spaces-thread-name": lambda n: 'Thread 1 (idle): "' + " " * n + "x\n    f (a.py:1)\n",
    "long-line": lambda n: "x" * n + "\n    f (a.py:1)\n",
    # nesting and JSON starts
    "nested-lines": lambda n: "[\n" * n,
    "nested-objects": lambda n: '[{"a":' * n + "\n",
    "nested-object-lines": lambda n: '[{"a":\n' * n,
    "schema-starts": lambda n: '{"schema":"debug-hang/stacks/v1"\n' * n,
    "schema-deep": lambda n: '{"schema":"debug-hang/stacks/v1","processes":[\n' * n,
    # pasted forms at scale
    "arrow-line": lambda n: "a -> " * n + "b\n",
    "arrow-lines": lambda n: "wait -> get -> main\n" * n,
    "prefixed-lines": lambda n: "".join(f"(W pid={i % 97}) f (a.py:{i})\n" for i in range(n)),
    "rank-tracebacks": lambda n: "".join(
        f'[rank{i % 8}]: Traceback (most recent call last):\n[rank{i % 8}]:   File "a.py", line {i}, in f\n'
        f"[rank{i % 8}]: RuntimeError: x\n" for i in range(n)),
    "fence-lines": lambda n: "```\n" * n,
    "repeated-frames": lambda n: ('Traceback (most recent call last):\n  File "a.py", line 1, in f\n'
                                  + "  [Previous line repeated 999999999 more times]\n" * n),
    "mismatch": lambda n: ("RuntimeError: Detected mismatch between collectives on ranks. "
                           + "Rank 1 is running collective: CollectiveFingerPrint(OpType=ALLREDUCE), " * n
                           + "\n"),
    "mismatch-wrapped": lambda n: ("Detected mismatch between collectives on ranks. Rank 0 is running\n"
                                   + "collective: CollectiveFingerPrint(OpType=ALLREDUCE)\n" * n),
    # native dumpers: call syntax taken apart per line (parentheses, ` at `, ` from `)
    "gdb-parens": lambda n: "Thread 1 (Thread 0x1 (LWP 1) \"x\"):\n#0  0x1 in f " + "(" * n + ")" * n + "\n",
    "gdb-at-runs": lambda n: "#0  0x1 in f (a=" + ") at x" * n + ") at a.c:1\n",
    "gdb-from-runs": lambda n: "#0  0x1 in f () from" + " from x" * n + "\n",
    "gdb-frames": lambda n: "".join(f"#{i}  0x{i:x} in f{i} (a=<x at remote 0x1>, b=(1,)) at a.c:{i}\n" for i in range(n)),
    "gdb-threads": lambda n: "".join(f'Thread {i} (Thread 0x{i:x} (LWP {i}) "p"):\n#0  0x1 in f () from /lib/x.so\n\n'
                                     for i in range(1, n + 1)),
    "eu-stack-lines": lambda n: "PID 1 - process\n" + "".join(f"TID {i}:\n#0  0x{i:x} f - /lib/x.so\n" for i in range(n)),
    "lldb-ticks": lambda n: "* thread #1, name = 'x'\n    frame #0: 0x1 m`" + "`" * n + "\n",
    "stop-location": lambda n: "f (" + "x) at " * n + "a.c:1\n",
    "pybt-blocks": lambda n: ("Traceback (most recent call first):\n  Waiting for the GIL\n"
                              + '  File "a.py", line 1, in f\n    x()\n' * n),
    # sys._current_frames() recipe headers and poster notes
    "recipe-headers": lambda n: "".join(f"-- Thread ID: {i} ---\n" for i in range(n)) + '  File "a.py", line 1, in f\n',
    "thread-word-run": lambda n: "Thread " * n + "(1):\n",
    "note-marks": lambda n: "f (a.py:1)" + " <-" * n + "\n",
    "aligned-spaces": lambda n: "f" + " " * n + "a.py:1\n",
    "nccl-lines": lambda n: "".join(f"[Rank {i}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={i}, "
                                    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600001 "
                                    "milliseconds before timing out.\n" for i in range(n)),
    "nccl-ranks": lambda n: "Ranks " + ", ".join(str(i) for i in range(n)) + " failed to pass monitoredBarrier in 5 ms\n",
}
