"""A client retries its connect with no pause while the server it dials is still building its index.

Scenario: a LookupServer actor builds an index (minutes of hashing: real work) before it binds and
listens on the port the driver gave it; a LookupClient actor's `connector` thread dials that port
in a `while True:` whose `except OSError:` only counts (`self.attempts += 1`), with no sleep, and
sets `self.connected` once the connect succeeds. `lookup()` waits on that Event; the driver waits
on both calls. While the server computes, nothing listens on the port and the client spins at
100 % CPU; once the index is built the server listens, the connect succeeds and the job ends.

Mechanism: a connect retried at once to a loopback port nobody listens on *yet*, while another
process of the job (the one that will bind it) computes and advances: a wait on state another
process can change, not a livelock.
Truth: healthy (inconclusive or no-hang; never hang). It finishes once the index is built (about
2 min unloaded, up to ~7 min on a loaded node).
Fix: none needed (a back-off in the retry would spare the CPU).
"""
import hashlib
import json
import os
import socket
import threading

import ray

STEPS = int(os.environ.get("RT_INDEX_STEPS", "600"))  # x 250k hashes: ~150M, ~2.5 min on a free core


@ray.remote(num_cpus=0.1)
class LookupServer:
    def __init__(self, port: int):
        self.port = port
        self.built = 0

    def build_and_serve(self) -> int:
        digest = b"seed"
        index: dict[int, bytes] = {}
        for step in range(STEPS):
            for _ in range(250_000):
                digest = hashlib.sha256(digest).digest()
            index[step % 1024] = digest
            self.built = step + 1
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(8)
        conn, _ = sock.accept()
        keys = json.loads(conn.recv(65536))
        conn.sendall(json.dumps({k: index[len(k) % len(index)].hex()[:8] for k in keys}).encode())
        conn.close()
        sock.close()
        return self.built


@ray.remote(num_cpus=0.1, max_concurrency=2)
class LookupClient:
    def __init__(self, port: int):
        self.port = port
        self.connected = threading.Event()
        self.attempts = 0
        self.conn: socket.socket | None = None
        threading.Thread(target=self._connect, name="connector", daemon=True).start()

    def _connect(self) -> None:
        while True:
            try:
                self.conn = socket.create_connection(("127.0.0.1", self.port), timeout=1)
                break
            except OSError:
                self.attempts += 1
        self.connected.set()

    def lookup(self, keys: list[str]) -> dict:
        self.connected.wait()
        assert self.conn is not None
        self.conn.sendall(json.dumps(keys).encode())
        return json.loads(self.conn.recv(65536))


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = free_port()
    server = LookupServer.remote(port)
    built = server.build_and_serve.remote()
    client = LookupClient.remote(port)
    ref = client.lookup.remote(["user_age", "item_price", "ctr_7d"])
    print(f"READY index build started; the server will listen on {port} once built", flush=True)
    print(ray.get(ref), "index steps", ray.get(built))


if __name__ == "__main__":
    main()
