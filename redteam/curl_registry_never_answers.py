"""A task fetches a shard with curl (no timeout) from a detached HTTP server that accepted and never answers.

Scenario: the hung twin of healthy_curl_detached_trickle: `fetch_shard` runs
`subprocess.run(["curl", "-sS", "-o", path, url], timeout=900)` against a "model registry" outside
the job (started detached, as a service on another host would be) that accepts the connection, reads
the request and then blocks forever on an internal lock, sending nothing. curl has no `--max-time`.

Mechanism: a native child waiting on a connection that has received nothing since it was made.
Truth: hang, child-process-hang on the curl child (the cause is the registry, outside the job).
Fix: `curl --max-time`, a lower subprocess timeout, and check the registry.
"""
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
import threading
lock = threading.Lock()
lock.acquire()
lock.acquire(timeout=900)  # wedged on its own lock; exits after 15 min
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
    print(f"READY: fetch_shard's curl waits on a wedged registry on port {port} (detached, no process of the job)",
          flush=True)
    print("bytes:", ray.get(ref))


if __name__ == "__main__":
    main()
