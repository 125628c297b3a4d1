"""A task downloads a model shard from a detached registry that accepted the connection and never sends.

Scenario: the hung twin of healthy_detached_trickle_download. A `fetch_shard` task streams a file
over raw TCP from a "model registry" outside the job (a plain Python server started detached, out of
the driver's process tree: as a service on another host would be). The registry is wedged: it
accepts the connection and then blocks forever on an internal lock, sending nothing. The task reads
`sock.recv(65536)` on a socket with no timeout; the driver waits on the task.

Mechanism: a socket read with no timeout from a peer outside the job that never sends: the kernel
shows the connection has received no data since it was made.
Truth: hang, io-wait on fetch_shard at `sock.recv(65536)` (the cause is the registry, outside the
job). Fix: give the socket a timeout (`sock.settimeout`), and check the registry.
"""
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
import threading
lock = threading.Lock()
lock.acquire()
lock.acquire(timeout=900)  # wedged on its own lock; exits after 15 min
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
    port_file = tempfile.NamedTemporaryFile(prefix="registry_port_", delete=False).name
    subprocess.Popen(["/bin/sh", "-c", f'"{sys.executable}" -c "$0" > "{port_file}" 2>/dev/null &', SERVER],
                     start_new_session=True).wait()
    while not open(port_file).read().strip():
        time.sleep(0.1)
    port = int(open(port_file).read().split()[0])
    ref = fetch_shard.remote(port)
    time.sleep(3.0)
    print(f"READY: fetch_shard reads from a wedged registry on port {port} (detached, no process of the job)",
          flush=True)
    print("bytes:", ray.get(ref))


if __name__ == "__main__":
    main()
