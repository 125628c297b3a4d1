#!/usr/bin/env python3
"""Record PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL collective-mismatch error for real.

Two gloo ranks on loopback (FileStore, GLOO_SOCKET_IFNAME=lo): they agree on a few all_reduces,
then rank 0 calls broadcast while rank 1 calls all_reduce. With DETAIL, the process-group wrapper
compares the ranks' collective fingerprints first and raises on the mismatch. Each rank's stderr
is written to OUT/rank<N>.err (torch itself prefixes each line of the uncaught exception with
`[rankN]:`); OUT/combined.log interleaves the two files line by line, as a launcher's merged log
holds them. The rank program is collective_mismatch_rank.py (a file, so frames name it).

Usage: python collective_mismatch.py OUT_DIR [--steps 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

RANK_PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "collective_mismatch_rank.py")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = dict(os.environ, TORCH_DISTRIBUTED_DEBUG="DETAIL", GLOO_SOCKET_IFNAME="lo")
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = []
        for rank in range(2):
            err = open(os.path.join(args.out, f"rank{rank}.err"), "w")
            procs.append((subprocess.Popen(
                [sys.executable, RANK_PROGRAM, str(rank), store, str(args.steps)],
                stdout=err, stderr=subprocess.STDOUT, env=env), err))
        for proc, err in procs:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            err.close()
    outs = [open(os.path.join(args.out, f"rank{r}.err")).read().splitlines() for r in range(2)]
    with open(os.path.join(args.out, "combined.log"), "w") as fh:
        for i in range(max(len(o) for o in outs)):
            for lines in outs:
                if i < len(lines):
                    fh.write(lines[i] + "\n")
    print("return codes:", [p.returncode for p, _ in procs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
