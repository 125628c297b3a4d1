"""An index server started by a launcher script whose output the actor captures.

Scenario: Indexer.start_server runs the index server's launcher with
`subprocess.run([...], capture_output=True, text=True)`. The launcher (a `python -c` stand-in for
a shell wrapper) starts the server in the background with `subprocess.Popen` without redirecting
its stdout/stderr, prints the port and exits. The server (an HTTP server, in
`serve_forever`'s poll) inherited the launcher's stdout and stderr pipes; communicate() reads them
to end-of-file, which comes only once the server exits - never.
Mechanism: a pipe read to end-of-file whose write end a daemon grandchild holds; the daemon is idle
in an untimed wait (it serves), so it never exits.
Truth: hang; culprit the server process holding the pipes (the launcher's Popen that let it inherit
stdout/stderr); fix: start the server with stdout/stderr redirected (DEVNULL or a log file) and
start_new_session=True, or do not capture the launcher's output.
Driver in ray.get(start_server).
"""
import os
import subprocess
import sys

import ray

LAUNCHER = r'''
import subprocess, sys
server = ("import http.server, socketserver\n"
          "srv = socketserver.TCPServer(('127.0.0.1', 0), http.server.SimpleHTTPRequestHandler)\n"
          "srv.serve_forever(poll_interval=None)\n")
subprocess.Popen([sys.executable, "-c", server])
print("index server started", flush=True)
'''


@ray.remote(num_cpus=0.1)
class Indexer:
    def start_server(self):
        out = subprocess.run([sys.executable, "-c", LAUNCHER], capture_output=True, text=True)
        return out.returncode, out.stdout.strip()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ix = Indexer.remote()
    ray.get(ix.__ray_ready__.remote())
    ref = ix.start_server.remote()
    print("READY: driver -> Indexer.start_server (launcher's server holds stdout)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
