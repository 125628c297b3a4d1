"""Healthy: a task downloads a model shard from a server outside the job that sends 4 KB every 5 s.

Scenario: a `fetch_shard` task (the driver waits on it) streams a file over HTTP-like raw TCP from a
"model registry" that is no Ray process: a plain Python server the driver starts with
subprocess.Popen (on a real cluster: a service on another host). The registry is throttled by its
operator: it sends a 4 KB chunk every 5 s, 60 chunks in all (~5 min), then closes. The task reads
`sock.recv(65536)` in a loop and appends to a file; nothing is logged until the end. Any dump shows
the task in recv (kernel) and no Ray process doing anything; no task finishes for minutes; a
one-second window usually sees no byte arrive.

Mechanism (none: healthy): slow I/O from a peer the tool cannot dump (not a Ray process): bytes
arrive every 5 s and the file grows.
Truth: no hang (the download finishes). A right diagnosis is no-hang or inconclusive (a read from a
peer outside the job, bytes seen arriving or not); a hang (io-wait on fetch_shard called hung) is a
false hang.
"""
# redteam-settle: 25
import os
import socket
import subprocess
import sys
import tempfile
import time

import ray

SERVER = r'''
import socket, sys, time
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
for i in range(60):
    conn.sendall(bytes([i % 251]) * 4096)
    time.sleep(5.0)
conn.close()
'''


@ray.remote(num_cpus=0.25)
def fetch_shard(port: int) -> int:
    sock = socket.create_connection(("127.0.0.1", port))
    got = 0
    with tempfile.NamedTemporaryFile(prefix="shard_", delete=False) as out:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            out.write(data)
            out.flush()
            got += len(data)
    return got


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    registry = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    port = int(registry.stdout.readline())
    ref = fetch_shard.remote(port)
    time.sleep(3.0)
    print(f"READY: fetch_shard reads 4 KB every 5 s from a registry on port {port} (pid {registry.pid}, no Ray process)",
          flush=True)
    print("bytes:", ray.get(ref))
    registry.wait(timeout=30)


if __name__ == "__main__":
    main()
