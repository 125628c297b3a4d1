"""An Event is set by a connect thread that retries without pause against a port nobody listens on.

Scenario: a FeatureClient actor serves feature lookups for an eval job from a FeatureServer actor
over TCP. Its constructor starts a `connector` thread that connects to the server and then sets
`self.connected` (a threading.Event); `lookup()` waits on that event. The port comes from a
config file written by an earlier run (`features.json`, port of a server that is gone); today's
FeatureServer listens on a fresh port. The connector catches ConnectionRefusedError and retries
at once (no sleep): it spins at 100 % CPU, its `attempts` counter climbs by thousands a second,
and it never reaches `self.connected.set()`. The driver waits in `ray.get(client.lookup)`.

Mechanism: an Event whose only setter is a thread in a retry loop that cannot succeed (a livelock:
its loop state advances, the condition that ends it never comes); the waiter is a victim.
Truth: culprit FeatureClient's connector thread (retries a stale port, no backoff, no limit).
Fix: read the port from the live server (or discovery), back off and give up after N attempts.
"""
import json
import os
import socket
import tempfile
import threading

import ray


@ray.remote(num_cpus=0.1)
class FeatureServer:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            data = conn.recv(4096)
            conn.sendall(json.dumps({k: len(k) for k in json.loads(data)}).encode())
            conn.close()

    def address(self) -> int:
        return self.port


@ray.remote(num_cpus=0.1, max_concurrency=2)
class FeatureClient:
    def __init__(self, config: str):
        with open(config) as fh:
            self.port = json.load(fh)["port"]
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


def stale_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    server = FeatureServer.remote()
    live = ray.get(server.address.remote())
    config = os.path.join(tempfile.mkdtemp(prefix="feat_"), "features.json")
    with open(config, "w") as fh:
        json.dump({"port": stale_port(), "written_by": "run 2026-11-30"}, fh)
    client = FeatureClient.remote(config)
    ref = client.lookup.remote(["user_age", "item_price", "ctr_7d"])
    print(f"READY eval started (server listens on {live})", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
