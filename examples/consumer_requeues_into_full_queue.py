"""A writer actor's only consumer thread re-queues a failed batch into its own full bounded queue.

Scenario
    A ``WarehouseWriter`` actor (``max_concurrency=4``) ships feature rows to a warehouse:
    ``submit(batch)`` puts each batch into a bounded ``queue.Queue(maxsize=4)`` and returns; one
    background thread (``warehouse-consumer``) takes batches and sends them. The driver submits
    40 batches at once, faster than the sink drains, so the queue stays full and the actor's
    executor threads wait in ``submit``'s put.

Mechanism
    The warehouse rejects batches over its size quota. The consumer "retries later" with
    ``self.q.put(batch)`` back into the same queue - which is full. The consumer is the only
    thread whose code ever calls ``self.q.get()``, so nothing makes room: it waits on the
    queue's ``not_full`` condition that only its own next ``get()`` would notify. The 4
    executor threads block in ``submit``'s put behind it, and the other 31 ``submit`` calls are
    queued on the actor; the driver waits in ``ray.get`` on all 40.

What misleads
    Every executor slot of the actor is blocked and calls are queued behind them: it reads like
    a slot waiting for a call queued behind it (event-setter-queued), with a producer's
    ``submit`` put as the culprit. Wrong: the queued calls are more ``submit``s, which only put
    - a put is released only by a get, and the one getter waits in a put itself. The producers
    are victims; the consumer's re-queue is the cause.

Expected diagnosis
    ``queue-full-getter-puts``: WarehouseWriter's thread ``warehouse-consumer`` waits in
    ``self.q.put(batch)`` (``_consume``, the ``except`` branch) on the same full Queue its 4
    executor threads put into, and the job's code gets from ``self.q`` only in ``_consume``.
    Culprit: WarehouseWriter at ``_consume``'s put; the driver waits on its ``submit`` calls.
"""

import os
import queue
import threading
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "queue-full-getter-puts",
    "culprits": [{"class_name": "WarehouseWriter", "rank": None}],
    "notes": "WarehouseWriter's only consumer thread re-puts a rejected batch into its own full "
    "queue.Queue(maxsize=4) (_consume's `self.q.put(batch)`); the executor threads block in "
    "submit's put and 31 submits are queued behind them; the driver in ray.get on the submits.",
}

QUOTA_ROWS = 500


@ray.remote(num_cpus=0.25, max_concurrency=4)
class WarehouseWriter:
    def __init__(self):
        self.q: queue.Queue = queue.Queue(maxsize=4)
        self.sent = 0
        threading.Thread(target=self._consume, name="warehouse-consumer", daemon=True).start()

    def _send(self, batch: list) -> None:
        time.sleep(0.5)  # the warehouse's round trip (slower than the submits even on a loaded node: the queue fills)
        if len(batch) > QUOTA_ROWS:
            raise ValueError(f"batch of {len(batch)} rows over the size quota")
        self.sent += len(batch)

    def _consume(self) -> None:
        while True:
            batch = self.q.get()
            try:
                self._send(batch)
            except ValueError:
                self.q.put(batch)  # retry later

    def submit(self, batch: list) -> int:
        self.q.put(batch)
        return self.q.qsize()

    def count(self) -> int:
        return self.sent


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    writer = WarehouseWriter.remote()
    refs = [writer.submit.remote([i] * (800 if i in (10, 11) else 100)) for i in range(40)]
    time.sleep(8)
    print("READY: WarehouseWriter's consumer re-queues into its full queue; submits blocked", flush=True)
    print(ray.get(refs), ray.get(writer.count.remote()), flush=True)


if __name__ == "__main__":
    main()
