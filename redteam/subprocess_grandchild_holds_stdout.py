"""subprocess.run(capture_output=True) of a launcher whose daemon grandchild keeps stdout open.

Scenario: Indexer.start_server runs the index server's launcher script with
`subprocess.run([...], capture_output=True, text=True)`. The launcher (a `python -c` stand-in for
a shell wrapper) starts the server as a background grandchild (`subprocess.Popen` without
redirecting its stdout/stderr, so it inherits the launcher's pipes), prints "started" and exits
at once. communicate() reads until end-of-file on both pipes, which comes only when every write
end is closed -- the grandchild keeps them open for as long as it serves (forever, sleeping).
The launcher is a zombie; the parent waits in communicate's selector.
Mechanism: a pipe read whose write end is held by a long-lived grandchild that inherited it
(not the child the parent started); nothing will close it.
Truth: hang; culprit the grandchild holding the pipes (the launcher's Popen that let it inherit
stdout/stderr); fix: start the daemon with stdout/stderr redirected (DEVNULL or a log file) and
start_new_session, or do not capture the launcher's output.
Driver in ray.get(start_server).
"""
import os
import subprocess
import sys

import ray

LAUNCHER = r'''
import subprocess, sys
server = "import time\nwhile True:\n    time.sleep(5)\n"
subprocess.Popen([sys.executable, "-c", server])
print("started", flush=True)
'''


@ray.remote(num_cpus=0.1)
class Indexer:
    def start_server(self):
        out = subprocess.run([sys.executable, "-c", LAUNCHER], capture_output=True, text=True)
        return out.returncode, out.stdout.strip()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ix = Indexer.remote()
    ref = ix.start_server.remote()
    print("READY: driver -> Indexer.start_server (launcher's daemon holds stdout)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
