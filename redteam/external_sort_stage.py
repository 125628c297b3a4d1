"""An actor waits for a sort child that waits for end-of-input on a stdin the actor never closes.

Scenario: Sorter.sort starts `python -c` (standing in for GNU sort) with stdin=PIPE and stdout
to a file, writes the lines and flushes, then calls `proc.wait()` without closing `proc.stdin`.
The child reads `sys.stdin.read()` until EOF; the write end of its stdin is still open in the
actor, so it waits forever (idle, in read). The data is small: no pipe is full.

Mechanism: a parent waits on a child that waits for EOF on a pipe the parent holds open (the
parent is the one that must act).
Truth: culprit Sorter.sort (waits on the child while holding its stdin open); the child is a
victim (blocked in read on stdin). Fix: `proc.stdin.close()` before wait, or `proc.communicate(data)`.
"""
import os
import subprocess
import sys
import tempfile

import ray

CHILD = "import sys\nlines = sys.stdin.read().splitlines()\nprint('\\n'.join(sorted(lines)))\n"


@ray.remote(num_cpus=0.1)
class Sorter:
    def sort(self, lines: list[str]) -> str:
        out_path = os.path.join(tempfile.mkdtemp(prefix="sort_"), "sorted.txt")
        with open(out_path, "w") as out:
            proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=out)
            proc.stdin.write("\n".join(lines).encode())
            proc.stdin.flush()
            proc.wait()
        return out_path


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    s = Sorter.remote()
    ref = s.sort.remote([f"key{(i * 7919) % 1000:04d}" for i in range(1000)])
    print("READY sorting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
