"""Worker tasks take every CPU and poll for a server task that needs a CPU to start.

Mechanism: a hand-rolled parameter exchange: the driver submits 4 `worker` tasks (num_cpus=1 each,
the whole 4-CPU cluster) and then the `serve` task (num_cpus=1) that hosts the TCP endpoint they
talk to. Each worker retries connect() every 0.5 s until the server is up ("it may still be
starting"). The workers are not in ray.get, so they keep their CPUs; serve stays
PENDING_NODE_ASSIGNMENT forever; the driver waits in ray.get on the workers.
Truth: culprit the worker tasks holding every CPU while polling for a task that needs one
(submission order + no CPU left for the server); fix: start the server first as an actor (or
num_cpus=0 for it / fewer CPUs per worker), and bound the retry loop.
"""
import os
import socket
import time

import ray

PORT = 29777


@ray.remote(num_cpus=1)
def worker(rank):
    while True:
        try:
            with socket.create_connection(("127.0.0.1", PORT), timeout=1) as s:
                s.sendall(f"{rank}\n".encode())
                return s.recv(64).decode()
        except OSError:
            time.sleep(0.5)


@ray.remote(num_cpus=1)
def serve(n):
    srv = socket.create_server(("127.0.0.1", PORT))
    for _ in range(n):
        conn, _ = srv.accept()
        with conn:
            conn.sendall(b"ok " + conn.recv(64))
    return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    n = int(ray.cluster_resources()["CPU"])
    workers = [worker.remote(r) for r in range(n)]
    time.sleep(1)
    server = serve.remote(n)
    print(f"READY: {n} workers (1 CPU each) poll for a serve task that needs a CPU", flush=True)
    print(ray.get(workers), ray.get(server))


if __name__ == "__main__":
    main()
