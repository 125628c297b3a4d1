"""An actor waits for its export child to exit before opening the FIFO the child writes into.

Scenario: Exporter.export makes a named pipe (os.mkfifo) and starts a `python -c` child that
opens the FIFO for writing and streams rows into it. To "make sure the export finished" before it
parses, the actor calls `proc.wait()` first and only then opens the FIFO for reading. open() of a
FIFO for writing blocks until a reader opens it: the child sits in open() (kernel fifo_open, its
Python stack at `open(path, "w")`), the actor's thread in Popen.wait (waitpid) for the child.
The driver waits in ray.get.

Mechanism: a parent waits for a child's exit; the child waits in the kernel (FIFO open for
writing) for a reader, and the only reader is that same parent after its wait: cycle
parent → child exit → FIFO reader → parent.
Truth: culprit Exporter.export (waits for the writer child before opening the read end);
the child is blocked by it. Fix: open/read the FIFO first (or concurrently), then wait; or use a
pipe/regular file.
"""
import os
import subprocess
import sys
import tempfile

import ray

CHILD = r"""
import sys
path = sys.argv[1]
with open(path, "w") as fh:
    for i in range(1000):
        fh.write(f"row-{i},{i*i}\n")
print("child wrote 1000 rows", flush=True)
"""


@ray.remote(num_cpus=1)
class Exporter:
    def export(self):
        d = tempfile.mkdtemp(prefix="rt9_export_")
        path = os.path.join(d, "rows.fifo")
        os.mkfifo(path)
        proc = subprocess.Popen([sys.executable, "-c", CHILD, path])
        print("started export child", proc.pid, "-> waiting for it to finish", flush=True)
        rc = proc.wait()
        with open(path) as fh:
            rows = fh.read().splitlines()
        return rc, len(rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ex = Exporter.remote()
    ref = ex.export.remote()
    print("READY: driver -> Exporter.export (proc.wait() before opening the FIFO the child writes)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
