"""A driver's prefetch thread feeds a queue.Queue from remote shard loads; one load never returns.

Scenario
    A training driver overlaps loading with compute: a ``prefetch`` thread submits
    ``ShardLoader.load_shard`` calls, waits for each with ``ray.get`` and puts the shard into a bounded
    ``queue.Queue``; the main thread trains on ``q.get()``. ``ShardLoader.load_shard`` fetches the shard's
    index from a metadata service over a raw socket with no timeout (here a listener the driver
    starts on 127.0.0.1 that accepts and never answers, the stand-in for an overloaded service),
    only for shards past the local cache (shard 3 on).

Mechanism
    ``ShardLoader.load_shard(3)`` blocks forever in ``sock.recv``. The prefetch thread waits in ``ray.get``
    on it; the main thread waits in ``Queue.get`` on the queue only the prefetch thread fills.

What misleads
    The main thread waits on a ``queue.Queue`` of its own process while another thread of it
    runs: read alone, it is a local queue wait with nobody to blame, cut off from the loader. The
    link is that the thread that fills the queue is itself waiting in ``ray.get`` on an actor call.

Expected diagnosis
    ``io-wait``: the culprit is the ``ShardLoader`` actor (its ``load_shard`` call), blocked in ``sock.recv`` inside
    ``_fetch_index``; the driver waits for it (its queue is filled by a thread in ray.get on it).
"""

import os
import queue
import socket
import threading

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "io-wait",
    "culprits": [{"class_name": "ShardLoader", "rank": None}],
    "notes": "ShardLoader.load_shard(3) reads a shard index from a listener that accepts and never replies: "
    "sock.recv forever. Driver: prefetch thread in ray.get(load_shard), main thread in queue.Queue.get.",
}

CACHED_SHARDS = 3
NUM_SHARDS = 6


def silent_metadata_service() -> int:
    """A listener that accepts every connection and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    accepted = []

    def accept_forever() -> None:
        while True:
            accepted.append(srv.accept())

    threading.Thread(target=accept_forever, daemon=True, name="metadata-service").start()
    return srv.getsockname()[1]


def _fetch_index(port: int, shard: int) -> bytes:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(f"GET /index/{shard}\n".encode())
    return sock.recv(4096)  # no timeout


@ray.remote(num_cpus=0.1)
class ShardLoader:
    def __init__(self, port: int):
        self.port = port

    def load_shard(self, shard: int) -> list[int]:
        index = b"" if shard < CACHED_SHARDS else _fetch_index(self.port, shard)
        return [shard] * (100 + len(index))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = silent_metadata_service()
    loader = ShardLoader.remote(port)
    shards: queue.Queue = queue.Queue(maxsize=2)

    def prefetch() -> None:
        for shard in range(NUM_SHARDS):
            shards.put(ray.get(loader.load_shard.remote(shard)))

    threading.Thread(target=prefetch, daemon=True, name="prefetch").start()
    for step in range(NUM_SHARDS):
        rows = shards.get()
        print(f"step {step}: trained on {len(rows)} rows", flush=True)
        if step == CACHED_SHARDS - 1:
            print("READY: shards 0-2 trained; load_shard(3) waits on the metadata service", flush=True)


if __name__ == "__main__":
    main()
