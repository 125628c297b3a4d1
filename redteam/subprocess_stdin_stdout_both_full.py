"""An actor writes all its input into a filter child's stdin before reading its stdout: both block writing.

Scenario: Normalizer.run starts a `python -c` filter child (stdin=PIPE, stdout=PIPE) that reads
lines and writes each normalised line back at once. The actor writes the whole corpus
(`proc.stdin.write(data)`, ~8 MB) and only then reads `proc.stdout.read()`. After ~64 KB the
child's stdout pipe is full: the child blocks in write(1) (pipe_write) and stops reading; its
stdin pipe fills next and the actor blocks in write to the child's stdin (pipe_write too). Each
waits for the other to read. The driver waits in ray.get.

Mechanism: a two-pipe write/write deadlock between a parent and its child (what communicate()
avoids): the parent's write to stdin waits for the child to read, the child's write to stdout
waits for the parent to read.
Truth: culprit Normalizer.run (writes all input before reading any output; line
`proc.stdin.write(data)`); the child is its victim. Fix: `proc.communicate(data)`, or a writer
thread feeding stdin while the main thread reads stdout.
"""
import os
import subprocess
import sys

import ray

FILTER = r"""
import sys
for line in sys.stdin:
    sys.stdout.write(line.strip().lower() + "\n")
"""


@ray.remote(num_cpus=0.5)
class Normalizer:
    def run(self, n_lines):
        data = "".join(f"Some Mixed CASE Line Number {i:08d} of the corpus\n" for i in range(n_lines)).encode()
        proc = subprocess.Popen([sys.executable, "-c", FILTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        print(f"normalizer: child {proc.pid}, writing {len(data)} bytes", flush=True)
        proc.stdin.write(data)
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait()
        return len(out)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    nz = Normalizer.remote()
    ref = nz.run.remote(200_000)
    print("READY: driver -> Normalizer.run (writes all of stdin before reading stdout)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
