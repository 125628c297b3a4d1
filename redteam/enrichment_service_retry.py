"""Enrichment actor retrying an external geo service that is still warming up (it recovers).

Scenario: a batch-enrichment job needs a geocoding service outside Ray (here a small HTTP server
the driver starts as a separate process, standing in for a service in another team's cluster).
The service answers 503 "warming up" for its first ~4 minutes. Enricher.enrich() uses a quiet
retry helper (exponential back-off capped at 15 s, per-attempt timeout 5 s, no logging per
attempt) and succeeds once the service is up. The driver waits in ray.get.

Mechanism: none -- a wait on an external service whose retries succeed later. The actor's stack
is in time.sleep inside _with_retries between attempts, or in a socket read for a few ms; it
has a TCP connection (TIME_WAIT/ESTABLISHED) to 127.0.0.1:<port> now and then.
Truth: NOT hung (finishes when the service comes up). Expected no-hang or inconclusive
("waiting on an external service, retrying"), never hang.
"""
# redteam-settle: 25
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request

import ray

SERVER = textwrap.dedent("""
    import http.server, json, sys, time
    up_at = time.time() + float(sys.argv[2])
    class H(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass
        def do_GET(self):
            if time.time() < up_at:
                self.send_response(503); self.end_headers(); self.wfile.write(b"warming up"); return
            body = json.dumps({"lat": 48.1, "lon": 11.6}).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
""")


def _with_retries(fn, attempts: int = 40, base: float = 1.0, cap: float = 15.0):
    for attempt in range(attempts):
        try:
            return fn()
        except (urllib.error.HTTPError, urllib.error.URLError, TimeoutError):
            if attempt == attempts - 1:
                raise
            time.sleep(min(cap, base * 2 ** attempt))


@ray.remote(num_cpus=0.1)
class Enricher:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint

    def _lookup(self, address: str) -> dict:
        with urllib.request.urlopen(f"{self.endpoint}/geocode?q={urllib.parse.quote(address)}", timeout=5) as resp:
            return json.loads(resp.read())

    def enrich(self, rows: list[str]) -> list[dict]:
        return [_with_retries(lambda a=a: self._lookup(a)) for a in rows]


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    port = free_port()
    service = subprocess.Popen([sys.executable, "-c", SERVER, str(port), "240"])
    try:
        ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
        enricher = Enricher.remote(f"http://127.0.0.1:{port}")
        ref = enricher.enrich.remote(["Marienplatz 1", "Odeonsplatz 2"])
        print("READY enriching rows", flush=True)
        print(ray.get(ref))
    finally:
        service.kill()


if __name__ == "__main__":
    main()
