"""A launcher that compresses in the background while the actor captures its output (healthy).

Scenario: Packer.pack runs a packing launcher with `subprocess.run([...], capture_output=True)`.
The launcher starts the compression step in the background (`subprocess.Popen` without
redirecting its output) and exits; the background step hashes and compresses in pure Python for
about 2 minutes, then exits. communicate() waits for end-of-file on the pipes the background step
inherited: it returns once that step ends.
Mechanism: a pipe read to end-of-file whose write end a grandchild holds; the grandchild works
(CPU) and ends by itself.
Truth: healthy (slow); the wait ends when the background step exits (~2 min). Right: no-hang or
inconclusive naming the background step; a hang is a false hang.
Driver in ray.get(pack).
"""
import os
import subprocess
import sys

import ray

# redteam-settle: 12

LAUNCHER = r'''
import subprocess, sys
step = ("import hashlib, time, zlib\n"
        "end = time.time() + 120\n"
        "h = b'x'\n"
        "while time.time() < end:\n"
        "    h = hashlib.sha256(zlib.compress(h * 64)).digest()\n")
subprocess.Popen([sys.executable, "-c", step])
print("packing in the background", flush=True)
'''


@ray.remote(num_cpus=0.1)
class Packer:
    def pack(self):
        out = subprocess.run([sys.executable, "-c", LAUNCHER], capture_output=True, text=True)
        return out.returncode, out.stdout.strip()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    p = Packer.remote()
    ray.get(p.__ray_ready__.remote())
    ref = p.pack.remote()
    print("READY: driver -> Packer.pack (background step holds stdout for ~2 min)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
