"""A result collector waits in Listener.accept() for a scorer task that already returned without connecting.

Scenario: a Collector actor opens a `multiprocessing.connection.Listener` on a loopback port and
waits in `accept()` for the scorer task to deliver its results. The scorer is a separate Ray task
(given only the port number): it scores a few seconds of pure Python, then sends only "when there
is something to send" — its filter keeps the scores above a threshold that no score reaches
(`best > 1_000_003`, the modulus), so it returns None without ever connecting. The task is
FINISHED; the collector's thread sleeps in accept (inet_csk_accept) forever, the driver waits on
`collect`. No other work of the job runs, nothing is logged.

Mechanism: an accept() on a listening socket whose only client (the one call given the port)
ended without connecting, while nothing else of the job works or starts: nothing can connect.
Truth: hang. Culprit: the Collector's accept wait (`Collector.collect`, the `accept()` line: it
waits for a connection nothing of the job will make); the cause is the scorer's early return
(`score`, FINISHED, never connected). The driver is a victim.
Fix: the scorer always connects (send an empty result), or accept with a timeout
(`listener._listener._socket.settimeout`, or a `multiprocessing.connection.wait` with a deadline).
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
    if best > 1_000_003:  # nothing to send (never true: the modulus bounds best)
        with Client(("127.0.0.1", port), authkey=b"rt10") as conn:
            conn.send({"best": best, "n": i})
    return i


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    col = Collector.remote()
    port = ray.get(col.port.remote())
    ref = col.collect.remote()
    sref = score.remote(port, 5)
    print("scored", ray.get(sref), flush=True)
    print("READY: driver -> Collector.collect (accept); score() FINISHED without connecting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
