"""An HTTP gateway actor whose request handler calls its own actor, queued behind serve_forever().

Scenario: a model gateway exposes predictions over HTTP for legacy clients. ModelGateway.serve()
runs a ThreadingHTTPServer.serve_forever() inside the actor method (so it occupies the actor's
only concurrency slot); each request is handled on a server thread that calls
`ray.get(self.handle.predict.remote(x))` -- a call to the same actor, queued behind serve(),
which never returns. A LoadTester actor posts requests with urllib (no timeout) and waits in the
socket read; the driver waits in ray.get on LoadTester.run().

Mechanism: an HTTP server in an actor: a wait that crosses a TCP connection (LoadTester socket
-> gateway's handler thread) and then a self-call queued behind the actor's running method.
Truth: culprit ModelGateway (serve() blocks its only slot; the handler's self-call can never run).
Fix: run the server in a thread started by __init__ and call the model directly (or
max_concurrency > 1); give the client a timeout.
"""
import http.server
import json
import os
import socket
import threading
import urllib.request

import ray


@ray.remote(num_cpus=0.1)
class ModelGateway:
    def __init__(self):
        self.handle = ray.get_runtime_context().current_actor
        self.weights = [0.5, -0.25, 0.125]

    def predict(self, x: list[float]) -> float:
        return sum(w * v for w, v in zip(self.weights, x, strict=False))

    def serve(self, port: int) -> None:
        gateway = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                score = ray.get(gateway.handle.predict.remote(body["x"]))
                out = json.dumps({"score": score}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.started = threading.Event()
        server.serve_forever()


@ray.remote(num_cpus=0.1)
class LoadTester:
    def _post(self, url: str, x: list[float]) -> float:
        req = urllib.request.Request(url, data=json.dumps({"x": x}).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req) as resp:
            return json.loads(resp.read())["score"]

    def run(self, url: str, n: int) -> float:
        return sum(self._post(url, [i, 1.0, 2.0]) for i in range(n))


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = free_port()
    gateway = ModelGateway.remote()
    gateway.serve.remote(port)
    tester = LoadTester.remote()
    import time
    deadline = time.monotonic() + 120  # the gateway's server may take long to start on a loaded machine
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.5)
    ref = tester.run.remote(f"http://127.0.0.1:{port}/predict", 10)
    print("READY load test running", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
