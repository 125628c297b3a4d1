#!/usr/bin/env python3
"""Time the redaction pass: linear on adversarial input, cheap on a real diagnosis.

1. Adversarial shapes, each at n and 4n characters (the time must grow ~4x, not 16x): long runs of
   word characters, of spaces, of base64 characters, repeated `key=` / `token: ` prefixes without a
   value, `scheme://` and `user:` without `@`, unterminated OSC escapes, PEM headers, backticks.
2. A real capture scaled up: the task rows of tests/data/redact/secrets_in_the_job/ replicated to
   10,000 tasks, redacted as a structure (what the pipeline does to a snapshot) with 50 values learnt.

Usage: python benchmarks/bench_redact.py [--n 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from debug_hang.redact import Redactor  # noqa: E402
from debug_hang.untrusted import fence, md_cell, strip_controls  # noqa: E402

CAPTURE = os.path.join(ROOT, "tests", "data", "redact", "secrets_in_the_job")

SHAPES: dict[str, Callable[[int], str]] = {
    "word run": lambda n: "a" * n,
    "space run": lambda n: " " * n,
    "base64 run": lambda n: ("Ab1/" * (n // 4 + 1))[:n],
    "key= repeated": lambda n: ("key=" * (n // 4 + 1))[:n],
    "token: no value": lambda n: ("token: " * (n // 7 + 1))[:n],
    "scheme:// no @": lambda n: ("http://u:" * (n // 9 + 1))[:n],
    "user: run no @": lambda n: "http://u:" + "p" * n,
    "OSC unterminated": lambda n: ("\x1b]52;c;" + "A" * 100) * (n // 108 + 1),
    "PEM headers": lambda n: ("-----BEGIN RSA PRIVATE KEY-----\n" * (n // 32 + 1))[:n],
    "backticks": lambda n: "`" * n,
    "hf_ prefixes": lambda n: ("hf_" * (n // 3 + 1))[:n],
    "eyJ. prefixes": lambda n: ("eyJabcdefgh." * (n // 12 + 1))[:n],
}


def timed(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000,
                        help="characters of the smaller input (default 1000000; below ~1 MB the CPU "
                             "caches, not the algorithm, set the ratio)")
    args = parser.parse_args()
    red = Redactor()
    red.learn([f"learnt-secret-value-{i:04d}" for i in range(50)])
    print(f"{'shape':<18} {'n':>9} {'t(n) ms':>9} {'t(4n) ms':>9} {'ratio':>6}")
    worst = 0.0
    for name, make in SHAPES.items():
        small, large = make(args.n), make(4 * args.n)

        def one(text: str) -> Callable[[], object]:
            return lambda: (red.redact(strip_controls(text)), md_cell(text), fence([text]))

        t1, t4 = timed(one(small)), timed(one(large))
        ratio = t4 / max(t1, 1e-9)
        worst = max(worst, ratio)
        print(f"{name:<18} {args.n:>9} {t1 * 1e3:>9.1f} {t4 * 1e3:>9.1f} {ratio:>6.1f}")
    print(f"worst growth for 4x input: {worst:.1f}x (linear: ~4x)")

    with open(os.path.join(CAPTURE, "tasks.json")) as fh:
        rows = json.load(fh)
    tasks = [dict(rows[i % len(rows)], task_id=f"{i:048x}") for i in range(10_000)]
    size = len(json.dumps(tasks))
    seconds = timed(lambda: red.redact_obj(tasks))
    encode = timed(lambda: json.dumps(tasks))
    print(f"10,000 real task rows ({size / 2**20:.1f} MiB of JSON) redacted as a structure: {seconds:.2f} s "
          f"({seconds / encode:.1f}x the time json.dumps takes to encode them here)")


if __name__ == "__main__":
    main()
