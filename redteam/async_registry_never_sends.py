"""An async actor awaits a model shard from a detached registry that accepted the connection and never sends.

Scenario: the hung twin of healthy_async_detached_trickle_download. `ShardCache.fetch` opens an
asyncio stream to a "model registry" outside the job (started detached, as a service on another
host would be) and awaits `reader.read(65536)` with no timeout; the registry is wedged on its own
lock after accepting and sends nothing. The driver waits on `fetch`.

Mechanism: an await on a socket read from a peer outside the job that never sends: the loop's only
TCP connection has received no data since it was made.
Truth: hang, ShardCache at `await reader.read(65536)` (async-await-stuck or io-wait); the cause is
the registry, outside the job. Fix: `asyncio.wait_for(reader.read(...), timeout)`, check the registry.
"""
import asyncio
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
import threading
lock = threading.Lock()
lock.acquire()
lock.acquire(timeout=900)  # wedged on its own lock; exits after 15 min
conn.close()
'''


@ray.remote(num_cpus=0.25)
class ShardCache:
    async def fetch(self, port: int) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        got = 0
        with tempfile.NamedTemporaryFile(prefix="shard_", delete=False) as out:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                out.write(data)
                out.flush()
                got += len(data)
        writer.close()
        return got


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port_file = tempfile.NamedTemporaryFile(prefix="registry_port_", delete=False).name
    subprocess.Popen(["/bin/sh", "-c", f'"{sys.executable}" -c "$0" > "{port_file}" 2>/dev/null &', SERVER],
                     start_new_session=True).wait()
    while not open(port_file).read().strip():
        time.sleep(0.1)
    port = int(open(port_file).read().split()[0])
    cache = ShardCache.remote()
    ref = cache.fetch.remote(port)
    time.sleep(3.0)
    print(f"READY: ShardCache.fetch awaits a wedged registry on port {port} (detached, no process of the job)",
          flush=True)
    print("bytes:", ray.get(ref))


if __name__ == "__main__":
    main()
