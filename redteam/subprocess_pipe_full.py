"""Actor runs a child with stdout=PIPE and calls proc.wait(): the child blocks writing a full pipe.

Mechanism: Exporter.export spawns a python child that prints 2 MB to stdout; the parent calls
proc.wait() before reading stdout. The pipe (64 KiB) fills; the child blocks in write, the parent
in Popen.wait (waitpid). Differs from examples/child_process_hang (child blocked READING stdin).
Truth: culprit Exporter; fix: proc.communicate() (or read stdout before wait).
"""
import os
import subprocess
import sys

import ray

CHILD = "import sys\nfor i in range(40000): sys.stdout.write('row %06d ' % i + 'x'*40 + '\\n')\n"

@ray.remote(num_cpus=0.1)
class Exporter:
    def export(self):
        proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE)
        proc.wait()
        return len(proc.stdout.read())

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    e = Exporter.remote()
    print("READY: driver -> Exporter.export (child writes 2MB into stdout pipe, parent waits)", flush=True)
    print(ray.get(e.export.remote()))

if __name__ == "__main__":
    main()
