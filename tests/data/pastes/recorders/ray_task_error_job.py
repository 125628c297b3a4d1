"""The Ray job ray_task_error.py records: an actor method gives up waiting for a lock another
method holds (`acquire(timeout=2)` fails and it raises TimeoutError); the driver's ray.get raises
the RayTaskError, and its uncaught traceback ends the driver."""

import os
import threading
import time

import ray


@ray.remote(max_concurrency=2, num_cpus=0)
class ParameterStore:
    def __init__(self) -> None:
        self.lock = threading.Lock()

    def hold(self) -> None:
        with self.lock:
            time.sleep(30)

    def update(self) -> None:
        if not self.lock.acquire(timeout=2):
            raise TimeoutError("could not get the parameter lock in 2 s")
        self.lock.release()


def main() -> None:
    # Submitted as a job to the recorder's loopback cluster (127.0.0.1, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0):
    # attach to it, never start a cluster of its own.
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = ParameterStore.remote()
    store.hold.remote()
    time.sleep(1)
    ray.get(store.update.remote())


if __name__ == "__main__":
    main()
