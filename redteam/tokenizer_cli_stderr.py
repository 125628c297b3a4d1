"""A tokenizer actor reads its CLI's stdout line by line; the CLI blocks writing warnings to an unread stderr pipe.

Scenario: Tokenizer.run starts the tokenizer CLI (a `python -c` stand-in) with stdout=PIPE and
stderr=PIPE (so that errors can be shown "if it fails") and consumes the token ids with
`for line in proc.stdout`. For every input line the CLI prints one result line to stdout, but for
lines with unknown characters it writes a long warning to stderr. After ~64 KB of warnings the stderr
pipe is full: the CLI blocks in `write(2)` on stderr, and stops writing stdout.
Mechanism: the actor's main thread is in `readline` of the child's stdout (pipe empty, the child
alive); the child's main thread is in a write on fd 2 (its stderr pipe full, nobody reads it). Each
waits for the other; no CPU; Ray sees one running actor task. Driver in ray.get(run).
Truth: culprit Tokenizer.run (stderr=PIPE never drained while it reads stdout); fix: stderr to a
file / DEVNULL / STDOUT, or `communicate()`, or a thread draining stderr.
"""
import os
import subprocess
import sys

import ray

CLI = r"""
import sys
for i in range(100000):
    if i >= 40:  # from here on the corpus has characters outside the vocabulary
        sys.stderr.write(f"warning: line {i}: unknown character U+{0xE000 + i:04X}, mapped to <unk>; " * 20 + "\n")
    if i % 50 == 0:
        sys.stdout.write(f"{i} " + " ".join(str(j) for j in range(i, i + 8)) + "\n")
        sys.stdout.flush()
"""


@ray.remote(num_cpus=1)
class Tokenizer:
    def run(self):
        proc = subprocess.Popen([sys.executable, "-c", CLI], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        n = 0
        for line in proc.stdout:
            n += 1
            if n <= 3:
                print("tokens:", line.strip()[:60], flush=True)
        rc = proc.wait()
        if rc:
            print("tokenizer failed:", proc.stderr.read()[-500:], flush=True)
        return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tok = Tokenizer.remote()
    ref = tok.run.remote()
    print("READY: driver -> Tokenizer.run (reads the CLI's stdout; its stderr pipe is full)", flush=True)
    print("lines", ray.get(ref))


if __name__ == "__main__":
    main()
