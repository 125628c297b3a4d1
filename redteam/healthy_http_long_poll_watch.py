"""Healthy: a config watcher blocks in an HTTP long-poll that the config server answers only when a version is published.

Scenario: a ConfigServer actor runs a small http.server; GET /watch?after=N is a long-poll (like
Consul blocking queries or the Kubernetes watch API): the handler thread waits up to 300 s on a
threading.Condition for a version > N and answers then. A Trainer's watcher calls
`urllib.request.urlopen(".../watch?after=0", timeout=600)` and blocks in recv. The next version is
published by a timer in the server ~4 min after start (the rollout cadence). Meanwhile: the client in
a socket read on an established connection, the server's handler thread in a timed Condition.wait,
nothing logs, no task finishes.

Mechanism: a socket read whose peer is alive and deliberately holding the request in a timed wait
(cond.wait(timeout=...)): a long-poll, not a dead peer.
Truth: healthy (no hang); the watch returns after ~4 min. A right answer is no-hang, or
inconclusive naming the server's timed wait; "hang" is a false hang.
"""
import http.server
import os
import threading
import time
import urllib.request

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class ConfigServer:
    def __init__(self, publish_after):
        self.version = 0
        self.cond = threading.Condition()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                after = int(self.path.rsplit("=", 1)[1])
                deadline = time.monotonic() + 300
                with outer.cond:
                    while outer.version <= after and time.monotonic() < deadline:
                        outer.cond.wait(timeout=deadline - time.monotonic())
                    body = str(outer.version).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        threading.Timer(publish_after, self._publish).start()

    def _publish(self):
        with self.cond:
            self.version += 1
            self.cond.notify_all()

    def port(self):
        return self.httpd.server_address[1]


@ray.remote(num_cpus=0.1)
class Trainer:
    def watch(self, port):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/watch?after=0", timeout=600) as r:
            return int(r.read())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    srv = ConfigServer.remote(240)
    port = ray.get(srv.port.remote())
    ref = Trainer.remote().watch.remote(port)
    time.sleep(3)
    print("READY: Trainer long-polls /watch; the server answers when v1 is published (~4 min)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
