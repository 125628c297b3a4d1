"""Healthy: an async actor streams a model shard over asyncio from a detached server that sends 4 KB every 5 s.

Scenario: a `ShardCache` async actor's `fetch(port)` opens an asyncio stream
(`asyncio.open_connection`) to a "model registry" outside the job (a plain Python server started
detached, as a service on another host would be) and reads `await reader.read(65536)` until EOF.
The registry is throttled: a 4 KB chunk every 5 s, 60 chunks (~5 min). The driver waits on
`fetch`. Any dump shows the actor's event loop idle in epoll with no timer and no frame of the
awaiting coroutine; nothing is logged, no task finishes for minutes.

Mechanism (none: healthy): slow I/O awaited in an event loop, from a peer outside the job.
Truth: no hang. A right diagnosis is no-hang or inconclusive (the loop waits on a socket that still
receives data); async-await-stuck or any hang is a false hang.
"""
# redteam-settle: 25
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
for i in range(60):
    conn.sendall(bytes([i % 251]) * 4096)
    time.sleep(5.0)
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
    print(f"READY: ShardCache.fetch awaits 4 KB every 5 s from a registry on port {port} (detached, no process of the job)",
          flush=True)
    print("bytes:", ray.get(ref))


if __name__ == "__main__":
    main()
