"""An actor waits on an export child that cannot exit: its writer thread waits for an atexit sentinel.

Scenario: Exporter.export runs a `python -c` child that writes rows to a file through a
non-daemon writer thread fed by a queue.Queue; the child registers `atexit.register(q.put, None)`
to stop the writer "at exit". The child's main code finishes (it prints "exported 500 rows"),
but at interpreter shutdown threading._shutdown joins non-daemon threads BEFORE atexit handlers
run: the writer waits in q.get() for the sentinel, the main thread waits in _shutdown for the
writer. The actor waits in subprocess.run (communicate); the driver in ray.get.

Mechanism: an exit-time deadlock in a child process: shutdown joins a thread whose stop signal is
sent by an atexit handler (which runs only after the join).
Truth: culprit the child process (main thread in threading._shutdown, writer thread in
Queue.get); Exporter.export and the driver are victims. Fix: put the sentinel (and join) at the
end of main, or make the writer a daemon with an explicit flush.
"""
import os
import subprocess
import sys
import tempfile

import ray

CHILD = """
import atexit, queue, sys, threading
q = queue.Queue()
out = open(sys.argv[1], "w")
def writer():
    while True:
        row = q.get()
        if row is None:
            out.close()
            return
        out.write(row)
t = threading.Thread(target=writer)
t.start()
atexit.register(q.put, None)
for i in range(500):
    q.put(f"{i},{i * i}\\n")
print("exported 500 rows", flush=True)
"""


@ray.remote(num_cpus=0.1)
class Exporter:
    def export(self) -> str:
        path = os.path.join(tempfile.mkdtemp(prefix="export_"), "metrics.csv")
        r = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True)
        return r.stdout.strip()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    e = Exporter.remote()
    ref = e.export.remote()
    print("READY exporting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
