"""Healthy: an actor polls a packing child every 5 s; the child writes compressed shards, silently.

Scenario: Packer.pack starts a `python -c` child that LZMA-compresses generated shards (CPU
heavy, ~5-10 s per shard here) and writes each to a file; the actor waits with a
`while proc.poll() is None: time.sleep(5)` loop, logging nothing. Progress shows only in another
process (the child at 100% CPU, its stack moving inside lzma) and in files appearing in the output
folder; the actor's own stack is the same sleep line in every sample.
Truth: no hang (the child is working; it finishes after ~12 shards).
"""
# redteam-settle: 25
import os
import subprocess
import sys
import tempfile
import time

import ray

CHILD = """
import lzma, os, random, sys
out = sys.argv[1]
rng = random.Random(7)
for shard in range(12):
    words = [rng.choice(["alpha", "beta", "gamma", "delta"]) + str(rng.randint(0, 999)) for _ in range(400_000)]
    data = " ".join(words).encode()
    with open(os.path.join(out, f"shard-{shard:03d}.xz"), "wb") as fh:
        fh.write(lzma.compress(data, preset=9))
"""


@ray.remote(num_cpus=1)
class Packer:
    def pack(self) -> int:
        out = tempfile.mkdtemp(prefix="packed_")
        proc = subprocess.Popen([sys.executable, "-c", CHILD, out])
        while proc.poll() is None:
            time.sleep(5)
        return len(os.listdir(out))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    p = Packer.remote()
    ref = p.pack.remote()
    print("READY packing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
