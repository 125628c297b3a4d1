"""Healthy: an actor waits in subprocess.run on a child that computes for ~2.5 min, silently.

Mechanism: Builder.build runs a `python -c` child (standing in for a compiler / a kernel
autotuner) that burns CPU for ~150 s with no output, and waits in communicate(). The actor's only
thread is parked in a wait on its child; nothing finishes, nothing is logged. Truth: no hang (the
child is busy on CPU: it is the progress).
"""
import os
import subprocess
import sys

import ray

CHILD = "import time\nt=time.time()\nx=0\nwhile time.time()-t<150:\n    x=(x*31+7)%1000003\nprint(x)\n"


@ray.remote(num_cpus=0.1)
class Builder:
    def build(self):
        r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
        return r.stdout.strip()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    b = Builder.remote()
    print("READY: Builder.build waits on a CPU-busy child for ~150 s", flush=True)
    print(ray.get(b.build.remote()))


if __name__ == "__main__":
    main()
