"""Healthy: a mirror actor downloads a dataset from a rate-limited upstream that trickles 16 KB every 0.25 s.

Scenario: the upstream (an actor serving one TCP connection) is throttled by its operator to
~64 KB/s and sends a 15 MB archive in 16 KB chunks, sleeping 0.25 s between them. Mirror.fetch
reads `sock.recv(1 << 16)` in a loop and appends to a file; nothing is logged until the end
(~4 min). Any single dump shows the client in recv and the server in time.sleep.

Mechanism (none: healthy): slow I/O; bytes arrive several times a second and the file grows.
Truth: no hang (the download finishes). A right diagnosis says no-hang or inconclusive; a hang
(io-wait on the Mirror, or a throttled server called a culprit) is a false hang.
"""
# redteam-settle: 25
import os
import socket
import tempfile
import threading
import time

import ray

CHUNK, CHUNKS, PAUSE_S = 16 << 10, 960, 0.25


@ray.remote(num_cpus=0.1)
class Upstream:
    def start(self) -> int:
        self.srv = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._serve, daemon=True, name="upstream-send").start()
        return self.srv.getsockname()[1]

    def _serve(self) -> None:
        conn, _ = self.srv.accept()
        payload = os.urandom(CHUNK)
        with conn:
            for _ in range(CHUNKS):
                conn.sendall(payload)
                time.sleep(PAUSE_S)


@ray.remote(num_cpus=0.1)
class Mirror:
    def fetch(self, port: int) -> int:
        path = os.path.join(tempfile.mkdtemp(prefix="mirror_"), "archive.tar")
        total = 0
        with socket.create_connection(("127.0.0.1", port)) as s, open(path, "wb") as out:
            while True:
                data = s.recv(1 << 16)
                if not data:
                    break
                out.write(data)
                total += len(data)
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    up = Upstream.remote()
    port = ray.get(up.start.remote())
    ref = Mirror.remote().fetch.remote(port)
    print("READY mirroring", flush=True)
    print("bytes", ray.get(ref))


if __name__ == "__main__":
    main()
