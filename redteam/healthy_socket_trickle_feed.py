"""Healthy: a consumer waits on an Event set by a reader thread in recv() on a feed that sends one record every 40 s.

Scenario: a MarketFeed actor serves a slow upstream: on a TCP connection (loopback) it sends one
JSON record every 40 s (the upstream's cadence), ten records in all, then closes. A Recorder
actor's constructor connects and starts a `reader` thread that `recv()`s, appends records and sets
`self.complete` (a threading.Event) when the feed closes; `snapshot()` waits on it. For ~7
minutes: the Recorder's main thread waits on the Event, its reader is in `recv` (kernel), the
feed's sender in `time.sleep(40)`; no log line, no task finishes.
Mechanism (none: healthy): an Event set by a thread reading a socket whose peer (alive, in a
paced send loop) writes every 40 s and then closes.
Truth: no hang. A right diagnosis is no-hang or inconclusive; io-wait / event-never-set / a hang
naming Recorder or MarketFeed is a false hang.
"""
# redteam-settle: 25
import json
import os
import socket
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class MarketFeed:
    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)

    def port(self) -> int:
        return self.srv.getsockname()[1]

    def serve(self, n: int, every_s: float) -> int:
        conn, _ = self.srv.accept()
        for i in range(n):
            time.sleep(every_s)
            conn.sendall((json.dumps({"seq": i, "px": 100 + i}) + "\n").encode())
        conn.close()
        return n


@ray.remote(num_cpus=0.1, max_concurrency=2)
class Recorder:
    def __init__(self, port: int):
        self.records: list[dict] = []
        self.complete = threading.Event()
        self.sock = socket.create_connection(("127.0.0.1", port))
        threading.Thread(target=self._read, name="reader", daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.records.append(json.loads(line))
        self.complete.set()

    def snapshot(self) -> int:
        self.complete.wait()
        return len(self.records)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    feed = MarketFeed.remote()
    port = ray.get(feed.port.remote())
    sent = feed.serve.remote(10, 40.0)
    rec = Recorder.remote(port)
    out = rec.snapshot.remote()
    print("READY recording", flush=True)
    print(ray.get([sent, out]))


if __name__ == "__main__":
    main()
