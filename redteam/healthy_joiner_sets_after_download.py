"""Healthy: an actor's call waits on an Event that a coordinator thread sets once the download thread it joins ends.

Scenario: a `ModelStore` actor's constructor starts a `coordinator` thread that starts a `download`
thread (urllib.request.urlopen(...).read() of a 240 KB weights file from a "model registry" outside the
job: a plain HTTP server started detached, throttled to 4 KB every 5 s, ~5 min), `join()`s it, then
sets `self.ready`. `get_weights()` waits on `self.ready.wait()`; the driver waits on it. For minutes:
the caller in Event.wait, the coordinator in Thread.join, the download thread in library code (http
client, socket read), no log line, no task finishing.

Mechanism (none: healthy): an event set by a thread that first joins a thread doing slow I/O.
Truth: no hang (ready is set once the download ends). A right diagnosis is no-hang or inconclusive;
event-never-set or any hang is a false hang.
"""
# redteam-settle: 25
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import ray

SERVER = r'''
import socket, sys, time
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.recv(65536)
conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 245760\r\n\r\n")
for i in range(60):
    conn.sendall(bytes([i % 251]) * 4096)
    time.sleep(5.0)
conn.close()
'''


@ray.remote(num_cpus=0.25, max_concurrency=2)
class ModelStore:
    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/weights-v3"
        self.weights = b""
        self.ready = threading.Event()
        threading.Thread(target=self._coordinate, name="coordinator", daemon=True).start()

    def _download(self) -> None:
        self.weights = urllib.request.urlopen(self.url).read()

    def _coordinate(self) -> None:
        worker = threading.Thread(target=self._download, name="download", daemon=True)
        worker.start()
        worker.join()
        self.ready.set()

    def get_weights(self) -> int:
        self.ready.wait()
        return len(self.weights)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port_file = tempfile.NamedTemporaryFile(prefix="registry_port_", delete=False).name
    subprocess.Popen(["/bin/sh", "-c", f'"{sys.executable}" -c "$0" > "{port_file}" 2>/dev/null &', SERVER],
                     start_new_session=True).wait()
    while not open(port_file).read().strip():
        time.sleep(0.1)
    port = int(open(port_file).read().split()[0])
    store = ModelStore.remote(port)
    ref = store.get_weights.remote()
    time.sleep(3.0)
    print("READY: get_weights waits on ready; the coordinator joins a download that trickles 4 KB every 5 s",
          flush=True)
    print("bytes:", ray.get(ref))


if __name__ == "__main__":
    main()
