"""A writer's only consumer thread re-queues a failed batch into its own full bounded queue.

Scenario: an actor that ships feature rows to a warehouse. submit() puts batches into a bounded
queue.Queue(maxsize=4); one consumer thread takes batches and sends them. When a send fails
(here: the warehouse rejects a batch over the size quota), the consumer "retries later" by
`self.q.put(batch)` back into the same queue. The driver submits faster than the sink drains, so
the queue is full when the retry happens: the consumer — the only thread that ever calls get() —
blocks in put() on its own queue; submit() calls block in put() too, forever.

Mechanism: the sole consumer of a bounded queue blocks putting into that queue: the thread that
would make room waits for room (a self-wait through the queue's not_full condition); the
producers are victims.
Truth: hang; culprit WarehouseWriter._consume's retry `self.q.put(batch)` (the consumer thread).
Fix: keep retries in a separate unbounded list/deque (or put_nowait and drop/park), never block the
consumer on its own queue.
"""
import os
import queue
import threading
import time

import ray


@ray.remote(num_cpus=0.25, max_concurrency=4)
class WarehouseWriter:
    def __init__(self):
        self.q: queue.Queue = queue.Queue(maxsize=4)
        self.sent = 0
        threading.Thread(target=self._consume, name="warehouse-consumer", daemon=True).start()

    def _send(self, batch):
        time.sleep(0.2)
        if len(batch) > 500:
            raise ValueError("batch over the size quota")
        self.sent += len(batch)

    def _consume(self):
        while True:
            batch = self.q.get()
            try:
                self._send(batch)
            except ValueError:
                self.q.put(batch)

    def submit(self, batch):
        self.q.put(batch)
        return self.q.qsize()

    def count(self):
        return self.sent


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = WarehouseWriter.remote()
    refs = []
    for i in range(40):
        n = 800 if i in (10, 11) else 100
        refs.append(w.submit.remote([i] * n))
    time.sleep(8)
    print("READY: consumer blocked putting a retry into its own full queue; submits blocked", flush=True)
    print(ray.get(refs), ray.get(w.count.remote()))


if __name__ == "__main__":
    main()
