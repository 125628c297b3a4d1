"""Healthy: an actor waits in proc.communicate() on a non-Python child (xz -9) compressing for minutes.

Scenario: an Archiver actor writes ~150 MB of synthetic shard data to a file, then packs it with
`xz -9 -T1` as a child process (`subprocess.run(..., capture_output=True)`); xz prints nothing until
it ends. The actor's only thread sits in `communicate()` → `selector.select`, the child has no Python
stack for py-spy, and nothing logs.

Mechanism (none: healthy): a parent waiting for a native child that computes (its CPU time grows in
/proc, its output file grows).
Truth: no hang. A right diagnosis is no-hang or inconclusive; child-process-hang or any hang naming
Archiver or xz is a false hang.
"""
# redteam-settle: 25
import os
import subprocess
import tempfile

import numpy as np
import ray


@ray.remote(num_cpus=1)
class Archiver:
    def pack(self, mb: int) -> int:
        root = tempfile.mkdtemp(prefix="archive-")
        path = os.path.join(root, "shard.bin")
        rng = np.random.default_rng(1)
        with open(path, "wb") as fh:
            for _ in range(mb):  # low-entropy bytes: xz -9 works hard on them
                fh.write((rng.integers(0, 16, 1 << 20, dtype=np.uint8)).tobytes())
        done = subprocess.run(["xz", "-9", "-T1", "-k", "-f", path], capture_output=True, check=True)
        return len(done.stdout) + os.path.getsize(path + ".xz")


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    arch = Archiver.remote()
    ref = arch.pack.remote(150)
    print("READY packing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
