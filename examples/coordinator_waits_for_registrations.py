"""A rendezvous coordinator actor waits for worker registrations that are queued behind it.

Scenario
    Distributed rollout workers must register with a ``Coordinator`` actor before training
    starts. The driver asks the coordinator ``wait_for_workers()`` (returns once all expected
    workers registered), then starts the workers, each of which calls
    ``coordinator.register.remote(worker_id)``. ``register`` sets a ``threading.Event`` when the
    last worker arrives; ``wait_for_workers`` blocks on that event.

Mechanism
    ``Coordinator`` is a plain (sync) actor, so ``max_concurrency`` is 1: one method at a time.
    ``wait_for_workers`` holds the actor's only thread in ``Event.wait()``; the workers'
    ``register`` calls arrive after it and stay queued (``SUBMITTED_TO_WORKER``, no worker pid)
    behind it, so the event is never set. The workers wait in ``ray.get`` on ``register``; the
    driver waits on ``wait_for_workers``. No lock, no Ray-level cycle, no error.

What misleads
    The workers' ``register`` calls look like they are in flight, and ``Event.wait`` suggests
    the event is set elsewhere. Wrong: a sync actor runs one method at a time; ``register`` is
    ``SUBMITTED_TO_WORKER`` behind ``wait_for_workers``, so the only code that could set the
    event can never start.

Expected diagnosis
    ``event-setter-queued``: Coordinator waits in ``Event.wait`` inside ``wait_for_workers``
    while 2 ``Coordinator.register`` calls are queued behind it. Fix: ``max_concurrency > 1``
    (a threaded actor), an async actor with ``asyncio.Event``, or wait outside the actor.
"""

import os
import threading
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "event-setter-queued",
    "culprits": [{"class_name": "Coordinator", "rank": None}],
    "notes": "sync actor (max_concurrency=1): wait_for_workers blocks in threading.Event.wait; "
    "the register calls that would set it are queued behind it on the same actor.",
}


@ray.remote(num_cpus=0.25)
class Coordinator:
    def __init__(self, expected_workers: int):
        self.expected = expected_workers
        self.registered: set[int] = set()
        self.all_registered = threading.Event()

    def register(self, worker_id: int) -> int:
        self.registered.add(worker_id)
        if len(self.registered) == self.expected:
            self.all_registered.set()
        return len(self.registered)

    def wait_for_workers(self) -> list:
        self.all_registered.wait()
        return sorted(self.registered)


@ray.remote(num_cpus=0.25)
class RolloutWorker:
    def __init__(self, worker_id: int, coordinator):
        self.worker_id = worker_id
        self.coordinator = coordinator

    def start(self) -> int:
        ray.get(self.coordinator.register.remote(self.worker_id))
        return self.worker_id


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    coordinator = Coordinator.remote(expected_workers=2)
    ready = coordinator.wait_for_workers.remote()
    time.sleep(1.0)  # the barrier call is in before the workers start
    workers = [RolloutWorker.remote(i, coordinator) for i in range(2)]
    started = [w.start.remote() for w in workers]
    print("READY: waiting for 2 workers to register", flush=True)
    print(f"registered: {ray.get(ready)}; started: {ray.get(started)}", flush=True)


if __name__ == "__main__":
    main()
