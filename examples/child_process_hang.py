"""Preprocessing actor waiting on a child process that waits for an EOF that never comes.

Scenario
    A ``Preprocessor`` actor normalizes text shards by piping them through an external
    normalization script (here a small ``python -c`` program, standing in for a Perl/Moses or
    sentencepiece CLI). Small shards go through ``Popen.communicate()``. Large shards are
    streamed line by line into the child's stdin to avoid building one big string, and the actor
    then waits for the child with ``proc.wait()``. The ``Trainer`` asks for shards one by one.

Mechanism
    The streaming path writes every line and flushes, but never closes ``proc.stdin``. The child
    reads ``sys.stdin`` to EOF, so it blocks forever in ``read``; the parent blocks forever in
    ``Popen.wait``. (Its stdout is a pipe that nobody reads until the child exits either.)
    Shards 0-1 are small and succeed; shard 2 is large and hangs.

What misleads
    The actor waits in ``Popen.wait``, which reads as "the subprocess is slow", and ``py-spy
    dump --subprocesses`` may fail on a non-Python child. Wrong: the reason is in the child's
    own stack (idle reading stdin, which the parent never closes); dump the children by pid.

Expected diagnosis
    ``pipe-full-deadlock`` (the pipe deadlock, here on stdin): the Preprocessor's main thread is
    idle in ``Popen.wait`` (subprocess.py) inside ``Preprocessor._normalize_streaming``; its child
    (a Python process, unnamed in ``py-spy dump --subprocesses``) is asleep in the kernel reading
    its stdin (``pipe_read``), whose write end only the Preprocessor holds. Culprit: Preprocessor
    first (it must close stdin), then its child. The Trainer waits in ray.get on it; the driver on
    the Trainer.
"""

import os
import subprocess
import sys
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "pipe-full-deadlock",
    "culprits": [{"class_name": "Preprocessor", "rank": None}],
    "ready": "shard 1:",  # the hang sets in with shard 2, after the Trainer prints shard 1's count
    "notes": "Preprocessor._normalize_streaming writes a large shard to a child's stdin without "
    "closing it, then Popen.wait(); the child (python -c) blocks reading stdin to EOF. Shards "
    "0-1 use communicate() and succeed; shard 2 hangs. Trainer in ray.get on Preprocessor.",
}

NORMALIZER = r"""
import sys, unicodedata
text = sys.stdin.read()
out = [unicodedata.normalize("NFKC", line).strip().lower() for line in text.splitlines()]
sys.stdout.write("\n".join(l for l in out if l))
"""


@dataclass
class PrepConfig:
    shard_lines: tuple = (20, 40, 5000, 30)
    stream_threshold_lines: int = 1000
    num_epochs: int = 1


@ray.remote(num_cpus=0.1)
class Preprocessor:
    def __init__(self, cfg: dict):
        self.cfg = PrepConfig(**cfg)

    def _spawn(self):
        return subprocess.Popen([sys.executable, "-c", NORMALIZER], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)

    def _normalize_small(self, lines: list) -> list:
        out, _ = self._spawn().communicate("\n".join(lines))
        return out.splitlines()

    def _normalize_streaming(self, lines: list) -> list:
        proc = self._spawn()
        for line in lines:
            proc.stdin.write(line + "\n")
        proc.stdin.flush()
        proc.wait()
        return proc.stdout.read().splitlines()

    def process(self, shard: int) -> int:
        n = self.cfg.shard_lines[shard]
        lines = [f"  Shard {shard} Line {i}: Ｆｕｌｌｗｉｄｔｈ text  " for i in range(n)]
        if n > self.cfg.stream_threshold_lines:
            out = self._normalize_streaming(lines)
        else:
            out = self._normalize_small(lines)
        return len(out)


@ray.remote(num_cpus=0.1)
class Trainer:
    def __init__(self, prep, cfg: dict):
        self.cfg = PrepConfig(**cfg)
        self.prep = prep

    def fit(self) -> int:
        total = 0
        for shard in range(len(self.cfg.shard_lines)):
            n = ray.get(self.prep.process.remote(shard))
            total += n
            print(f"[trainer] shard {shard}: {n} normalized lines", flush=True)
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = PrepConfig()
    prep = Preprocessor.remote(asdict(cfg))
    trainer = Trainer.remote(prep, asdict(cfg))
    print("READY: Trainer.fit -> Preprocessor.process -> child normalizer (shard 2 streams)",
          flush=True)
    print(f"total lines: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
