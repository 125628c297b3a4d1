"""Healthy: a child's main code has returned and its exit waits ~90 s for a non-daemon uploader to finish.

Scenario: Exporter.export runs a `python -c` child that hands rows to a non-daemon uploader thread
and returns from its main code at once; the uploader writes one batch to a file every 0.5 s (a sleep standing in
for a slow network) and stops by itself after the last one. The interpreter's shutdown joins it
(threading._shutdown), so the child exits only when the upload is done; the actor waits in
subprocess.run meanwhile.

Mechanism: an exit that waits for a non-daemon thread still working: slow, not stuck.
Truth: no hang (the child exits after ~90 s and the call returns). A diagnosis must not call the
exit blocked: the thread it joins writes (bytes move) and sleeps out a timer, not waiting on what nobody gives.
"""
import os
import subprocess
import sys
import tempfile

import ray

CHILD = """
import sys, threading, time
rows = [f"{i},{i * i}\\n" for i in range(180)]
out = open(sys.argv[1], "w")
def upload():
    for row in rows:
        time.sleep(0.5)
        out.write(row * 40000)  # ~300 KiB a batch
        out.flush()
    out.close()
t = threading.Thread(target=upload)
t.start()
print("queued 180 batches", flush=True)
"""


@ray.remote(num_cpus=0.1)
class Exporter:
    def export(self) -> str:
        path = os.path.join(tempfile.mkdtemp(prefix="upload_"), "batches.csv")
        r = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True)
        return r.stdout.strip()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    e = Exporter.remote()
    ref = e.export.remote()
    print("READY: the export child exits once its uploader has written 180 batches (~90 s)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
