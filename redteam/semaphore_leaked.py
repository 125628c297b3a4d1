"""A threaded model server leaks BoundedSemaphore permits on failed requests; the next one waits.

Mechanism: ModelServer (max_concurrency=4) bounds concurrent inferences with
threading.BoundedSemaphore(2): infer() acquires, runs, releases, without try/finally. Two requests
with a bad input raise after acquire, so both permits are gone (the driver logs the errors and
moves on). The next good request waits in Semaphore.acquire forever: no thread holds the
semaphore, nobody will release it.
Truth: culprit ModelServer.infer (acquire without release on the error path); fix:
`with self.slots:` (release in finally).
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class ModelServer:
    def __init__(self):
        self.slots = threading.BoundedSemaphore(2)

    def infer(self, x):
        self.slots.acquire()
        if not isinstance(x, (int, float)):
            raise ValueError(f"bad input {x!r}")
        time.sleep(0.05)
        self.slots.release()
        return x * 2


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    srv = ModelServer.remote()
    print(ray.get(srv.infer.remote(1)))
    for bad in ("nan?", None):
        try:
            ray.get(srv.infer.remote(bad))
        except ray.exceptions.RayTaskError as e:
            print("request failed:", type(e.cause).__name__, flush=True)
    print("READY: driver -> ModelServer.infer(3) (both semaphore permits leaked)", flush=True)
    print(ray.get(srv.infer.remote(3)))


if __name__ == "__main__":
    main()
