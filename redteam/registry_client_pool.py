"""A model-registry client's one-connection urllib3 pool is held by a streamed response it never read to the end.

Scenario: the registry server (an actor running ThreadingHTTPServer) is healthy. RegistryClient
uses `urllib3.PoolManager(maxsize=1, block=True)` (the registry allows one connection per
client). `sync()` first sniffs the manifest with `preload_content=False`, reads its first 64
bytes to check the format, and keeps the response in `self.pending` to finish later; the
connection stays checked out. It then requests the weights: `_get_conn` waits on the pool's
LifoQueue (`pool_timeout=None`) for a connection that only the unread response would give back.

Mechanism: a connection-pool slot held by an object (an unreleased streaming response), not by
any thread; the waiter is in `queue.get()` inside urllib3; the server is idle and not at fault.
Truth: culprit RegistryClient.sync (the first response is never read out or released). The
registry server is not a culprit. Fix: `resp.release_conn()` / read it out / use a `with`, or
`maxsize` > 1 with `block=False`, and a pool timeout.
"""
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import ray

BODY = b"MANIFEST v2\n" + b"x" * (1 << 20)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


@ray.remote(num_cpus=0.1)
class Registry:
    def start(self) -> int:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self.server.server_address[1]


@ray.remote(num_cpus=0.1)
class RegistryClient:
    def __init__(self, port: int):
        import urllib3

        self.base = f"http://127.0.0.1:{port}"
        self.http = urllib3.PoolManager(maxsize=1, block=True)
        self.pending = []

    def sync(self, model: str) -> int:
        manifest = self.http.request("GET", f"{self.base}/{model}/manifest", preload_content=False)
        if not manifest.read(64).startswith(b"MANIFEST v2"):
            raise ValueError("old manifest format")
        self.pending.append(manifest)
        weights = self.http.request("GET", f"{self.base}/{model}/weights")
        return len(weights.data)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    reg = Registry.remote()
    port = ray.get(reg.start.remote())
    client = RegistryClient.remote(port)
    ref = client.sync.remote("ranker-v3")
    print("READY syncing", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
