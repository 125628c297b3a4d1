"""Healthy: a connector retries with back-off a loopback port whose server comes up two minutes later.

Scenario: a FeatureClient actor serves feature lookups from a FeatureServer actor over TCP. The
port is agreed in advance (`features.json`); the FeatureServer warms its cache for ~120 s and only
then listens on it. The client's constructor starts a `connector` thread that connects, catches
ConnectionRefusedError, counts the attempt and sleeps 0.5 s before the next one; once connected it
sets `self.connected` (a threading.Event), which `lookup()` waits on. The driver waits in
`ray.get(client.lookup)`. While the server warms up, nothing listens on the port: every attempt is
refused, the connector sleeps between them, and nothing finishes.

Mechanism (none: healthy): a retry with back-off against a service that is still starting.
Truth: no hang. A right diagnosis is no-hang or inconclusive; busy-loop / a hang naming
FeatureClient is a false hang.
"""
# redteam-settle: 25
import json
import os
import socket
import tempfile
import threading
import time

import ray


@ray.remote(num_cpus=0.1)
class FeatureServer:
    def __init__(self, port: int, warmup_s: float):
        self.port = port
        threading.Thread(target=self._serve, args=(warmup_s,), daemon=True).start()

    def _serve(self, warmup_s: float) -> None:
        time.sleep(warmup_s)  # warming the cache
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(8)
        while True:
            conn, _ = sock.accept()
            data = conn.recv(4096)
            conn.sendall(json.dumps({k: len(k) for k in json.loads(data)}).encode())
            conn.close()


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
                time.sleep(0.5)
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
    config = os.path.join(tempfile.mkdtemp(prefix="feat_"), "features.json")
    with open(config, "w") as fh:
        json.dump({"port": port}, fh)
    server = FeatureServer.remote(port, 150.0)
    client = FeatureClient.remote(config)
    ref = client.lookup.remote(["user_age", "item_price", "ctr_7d"])
    print(f"READY eval started (server warms up, then listens on {port})", flush=True)
    print(ray.get(ref))
    del server


if __name__ == "__main__":
    main()
