#!/usr/bin/env python3
"""Time parse + aggregate on 1k / 10k / 100k process dumps made from real captures.

The input replicates real py-spy dumps of hung Ray workers (tests/data/formats/): most
processes are copies of the ranks waiting in `all_reduce`, one in ten is the same stack dumped
with `--native` (as `ray stack` does), a few are odd ones out (the rank sleeping in `load_shard`,
the deadlocked threaded actor). Every copy gets its own pid and thread ids. The same processes
are also timed as one debug-hang/stacks/v1 JSON document. Target: 10k processes in under 3 s on
the project's 2-core machine, growing linearly.

Usage: python benchmarks/bench_parse.py [--sizes 1000,10000,100000] [--formats text,json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from debug_hang.model import stacks_to_dict  # noqa: E402
from debug_hang.parse.aggregate import aggregate  # noqa: E402
from debug_hang.parse.parsers import parse_text  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data", "formats")
MAJORITY = ["ray/Rank.train_step-8441.txt", "ray/Rank.train_step-8533.txt",
            "ray/Rank.train_step-8560.txt"]
NATIVE = "ray/Rank.train_step-native.txt"
ODD = ["ray/Rank.train_step-8532.txt", "ray/Threaded.backward-8681.txt"]
ODD_EVERY = 997  # a prime: the odd ones land at irregular places
NATIVE_EVERY = 10
_IDS = re.compile(r"^((?:Process|Thread) )(\d+)", re.MULTILINE)


def templates() -> tuple[list[str], str, list[str]]:
    def read(rel: str) -> str:
        with open(os.path.join(DATA, rel), encoding="utf-8") as fh:
            return fh.read()
    return [read(r) for r in MAJORITY], read(NATIVE), [read(r) for r in ODD]


def renumber(dump: str, base: int) -> str:
    """Give a dump's process and threads fresh ids: base for the process, base+k for threads."""
    first: dict[str, int] = {}

    def sub(m: re.Match[str]) -> str:
        old = m.group(2)
        if old not in first:
            first[old] = base + len(first)
        return m.group(1) + str(first[old])
    return _IDS.sub(sub, dump)


def make_input(n: int) -> tuple[str, int]:
    """py-spy text of n processes; returns (text, number of odd ranks: the expected outliers).
    Odd ones alternate between the sleeping rank (an outlier among the Rank actors) and the
    threaded actor (a role of its own, whose copies all agree)."""
    majority, native, odd = templates()
    parts = []
    odd_count = odd_seen = 0
    for i in range(n):
        base = 100_000 + i * 8
        if i % ODD_EVERY == ODD_EVERY // 2:
            src = odd[odd_seen % len(odd)]
            odd_count += odd_seen % len(odd) == 0
            odd_seen += 1
        elif i % NATIVE_EVERY == 3:
            src = native
        else:
            src = majority[i % len(majority)]
        parts.append(renumber(src, base))
    return "".join(parts), odd_count


def timed(fn, *args):  # type: ignore[no-untyped-def]
    """(result, wall seconds, CPU seconds of this process). On a shared 2-core machine the
    wall time includes other people's load; the CPU time is what the code costs."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    return result, time.perf_counter() - start, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="comma-separated process counts (default 1000,10000,100000)")
    parser.add_argument("--formats", default="text,json",
                        help="text (py-spy text, as ray stack or a paste), json (stacks/v1)")
    parser.add_argument("--target-s", type=float, default=3.0,
                        help="CPU-second budget for 10k processes, each format (default 3.0); "
                             "the exit status is 1 when it is exceeded")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    formats = [f for f in args.formats.split(",") if f]
    print(f"{'format':<6} {'processes':>9} {'input MB':>8} {'parse s':>8} {'group s':>8} "
          f"{'total s':>8} {'cpu s':>7} {'us/proc':>8} {'groups':>6} {'outliers':>8}")
    verdict = 0
    for n in sizes:
        text, odd = make_input(n)
        for fmt in formats:
            data = text
            if fmt == "json":
                data = json.dumps(stacks_to_dict(parse_text(text)))
            procs, t_parse, c_parse = timed(parse_text, data)
            agg, t_group, c_group = timed(aggregate, procs)
            total, cpu = t_parse + t_group, c_parse + c_group
            assert len(procs) == n, (len(procs), n)
            assert len(agg.outliers) == odd, (len(agg.outliers), odd)
            print(f"{fmt:<6} {n:>9} {len(data) / 1e6:>8.1f} {t_parse:>8.2f} {t_group:>8.2f} "
                  f"{total:>8.2f} {cpu:>7.2f} {cpu / n * 1e6:>8.1f} {len(agg.groups):>6} "
                  f"{len(agg.outliers):>8}", flush=True)
            if n == 10_000 and cpu > args.target_s:
                print(f"  over budget: {cpu:.2f} CPU s > {args.target_s} s for 10k processes")
                verdict = 1
            del procs, agg, data
        del text
    return verdict


if __name__ == "__main__":
    sys.exit(main())
