"""Tasks wait on a lock served by a multiprocessing manager; the client that took it has died.

Scenario: QuotaBroker (an actor) runs a multiprocessing BaseManager server in a thread of its
own process, serving one threading.Lock ("one calibration writer at a time"). Clients are Ray
tasks that connect with the manager's address and authkey and use the lock through an
AcquirerProxy. `calibrate` takes the lock and its process dies mid-write (a native crash; here
os._exit) without releasing: the manager released nothing (a served lock belongs to the server,
not to the client connection). Two `allocate` tasks then call acquire through their proxies: each
waits in the proxy's `conn.recv()` (a socket to the broker), while a manager handler thread in the
broker waits in `Lock.acquire` for each of them.

Mechanism: a lock held on behalf of a dead client, inside a manager server process, reached by
waiters only through a proxy socket (waiter recv → broker's serve_client thread → lock with no
live holder).
Truth: culprit the dead `calibrate` task (took the served lock and died holding it; its FAILED
row says WORKER_DIED); the broker's handler threads are the immediate blockers; the allocate tasks
and the driver are victims. Fix: a lock released on client death (per-connection ownership,
fcntl on a file), or acquire with a timeout and a lease.
"""
import os
import threading
import time
from multiprocessing.managers import AcquirerProxy, BaseManager

import ray

AUTH = b"quota-demo"
_SERVED: dict[str, object] = {}


def _get_lock():
    return _SERVED.setdefault("calib", threading.Lock())


class QuotaManager(BaseManager):
    pass


@ray.remote(num_cpus=0.1)
class QuotaBroker:
    def __init__(self):
        QuotaManager.register("calib_lock", callable=_get_lock, proxytype=AcquirerProxy)
        self.server = QuotaManager(address=("127.0.0.1", 0), authkey=AUTH).get_server()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def address(self):
        return self.server.address


def _client(address):
    QuotaManager.register("calib_lock", proxytype=AcquirerProxy)
    m = QuotaManager(address=tuple(address), authkey=AUTH)
    m.connect()
    return m.calib_lock()


@ray.remote(num_cpus=0.1, max_retries=0)
def calibrate(address) -> None:
    lock = _client(address)
    lock.acquire()
    time.sleep(0.5)
    os._exit(1)  # the calibration library crashes while the writer lock is held


@ray.remote(num_cpus=0.1)
def allocate(address, job: int) -> int:
    lock = _client(address)
    with lock:
        return job


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    broker = QuotaBroker.remote()
    address = ray.get(broker.address.remote())
    try:
        ray.get(calibrate.remote(address))
    except ray.exceptions.RayError as e:
        print("calibration failed:", type(e).__name__, flush=True)
    refs = [allocate.remote(address, j) for j in range(2)]
    print("READY allocating", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
