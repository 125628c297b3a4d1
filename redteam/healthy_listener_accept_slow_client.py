"""Healthy: a result collector waits in Listener.accept() while the task that will connect is still computing.

Scenario: a Collector actor opens a `multiprocessing.connection.Listener` on a loopback port and
waits in `accept()` for the scorer task to deliver its results. The scorer is a separate Ray task
(given only the port number) that runs a few minutes of pure-Python scoring before it connects
and sends. Meanwhile the collector's thread sleeps in accept (inet_csk_accept), no Ray call
links the two, nothing is logged.

Mechanism: an accept() on a listening socket whose client is a live process computing what it
will send (it connects later).
Truth: healthy (no hang): the scorer connects after ~6 min. A right answer is no-hang, or
inconclusive naming the accept and the busy scorer; "hang" is a false hang.
"""
import os
import time
from multiprocessing.connection import Client, Listener

import ray


@ray.remote(num_cpus=0.5)
class Collector:
    def __init__(self):
        self.listener = Listener(("127.0.0.1", 0), authkey=b"rt10")

    def port(self):
        return self.listener.address[1]

    def collect(self):
        with self.listener.accept() as conn:
            return conn.recv()


@ray.remote(num_cpus=0.5)
def score(port, seconds):
    t0 = time.monotonic()
    best, i = 0, 0
    while time.monotonic() - t0 < seconds:
        i += 1
        best = max(best, (i * 2654435761) % 1000003)
    with Client(("127.0.0.1", port), authkey=b"rt10") as conn:
        conn.send({"best": best, "n": i})
    return i


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    col = Collector.remote()
    port = ray.get(col.port.remote())
    ref = col.collect.remote()
    sref = score.remote(port, 360)
    print("READY: driver -> Collector.collect (accept) while score() computes ~6 min before connecting", flush=True)
    print(ray.get([ref, sref]))


if __name__ == "__main__":
    main()
