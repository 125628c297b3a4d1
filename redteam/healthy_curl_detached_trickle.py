"""Healthy: a task fetches a shard with curl from a detached HTTP server that sends 4 KB every 5 s.

Scenario: `fetch_shard` runs `subprocess.run(["curl", "-sS", "-o", path, url], timeout=900)`, the
shop's standard downloader, against a "model registry" outside the job (a plain Python HTTP server
started detached, as a service on another host would be). The registry is throttled: it answers with
a 240 KB body in 4 KB chunks every 5 s (~5 min). The task's Python stack is in `subprocess.run`
(waitpid); curl has no Python stack and sleeps in poll(); nothing is logged, no task finishes.

Mechanism (none: healthy): slow I/O in a native child process from a peer outside the job.
Truth: no hang. A right diagnosis is no-hang or inconclusive (the child's connection still receives
data); child-process-hang's hang, or any hang, is a false hang.
"""
# redteam-settle: 25
import os
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
conn.recv(65536)
conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 245760\r\n\r\n")
for i in range(60):
    conn.sendall(bytes([i % 251]) * 4096)
    time.sleep(5.0)
conn.close()
'''


@ray.remote(num_cpus=0.25)
def fetch_shard(port: int) -> int:
    path = tempfile.NamedTemporaryFile(prefix="shard_", delete=False).name
    subprocess.run(["curl", "-sS", "-o", path, f"http://127.0.0.1:{port}/shard-00017"], check=True, timeout=900)
    return os.path.getsize(path)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port_file = tempfile.NamedTemporaryFile(prefix="registry_port_", delete=False).name
    subprocess.Popen(["/bin/sh", "-c", f'"{sys.executable}" -c "$0" > "{port_file}" 2>/dev/null &', SERVER],
                     start_new_session=True).wait()
    while not open(port_file).read().strip():
        time.sleep(0.1)
    port = int(open(port_file).read().split()[0])
    ref = fetch_shard.remote(port)
    time.sleep(3.0)
    print(f"READY: fetch_shard's curl reads 4 KB every 5 s from a registry on port {port} (detached, no process of the job)",
          flush=True)
    print("bytes:", ray.get(ref))


if __name__ == "__main__":
    main()
