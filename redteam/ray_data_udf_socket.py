"""Ray Data map_batches UDF blocks reading from a service that accepts but never answers.

Mechanism: the driver starts a TCP listener (accepts, never replies) and iterates
ds.map_batches(enrich).iter_batches(). enrich() (a Ray Data map task) calls
urllib.request.urlopen(url) with no timeout for the block that holds id 0; it blocks in
socket recv forever. The driver sits in Ray Data's iterator (streaming executor threads).
Truth: culprit = the map task (enrich) in sock.recv; the driver and Ray Data's executor are victims.
"""
import os
import socket
import threading
import urllib.request

import ray


def silent_server() -> int:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns = []
    threading.Thread(target=lambda: [conns.append(srv.accept()) for _ in iter(int, 1)], daemon=True).start()
    return srv.getsockname()[1]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = silent_server()
    url = f"http://127.0.0.1:{port}/labels"

    def enrich(batch):
        if 0 in batch["id"]:
            urllib.request.urlopen(url).read()  # no timeout
        return {"id": batch["id"], "label": batch["id"] % 3}

    ds = ray.data.range(2000, override_num_blocks=4).map_batches(enrich, batch_size=100)
    print("READY: iterating ray.data pipeline; enrich() for block 0 calls a silent HTTP service", flush=True)
    for i, _ in enumerate(ds.iter_batches(batch_size=100)):
        print(f"batch {i}", flush=True)


if __name__ == "__main__":
    main()
