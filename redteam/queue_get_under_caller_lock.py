"""A consumer waits in queue.Queue.get() inside its caller's lock; the only producer thread waits for that lock.

Scenario: a BatchFeeder actor (threaded, max_concurrency=2) decodes records on a background
`decode` thread that, per record, takes `self._state_lock` to advance the shared cursor and then
puts the record into `self.q` (a queue.Queue). `next_batch()` (called by the driver in a loop)
takes `self._state_lock` "so the cursor and the batch stay consistent" and, inside the `with`,
calls the helper `_take()`, which does `self.q.get()` (no timeout) once per record. The driver
consumes faster than the decoder produces (0.3 s per record), so one `next_batch` finds the queue
empty while it holds the lock: it waits in `Queue.get` (a Condition wait of the queue), the decode
thread waits at `with self._state_lock:` -- the only thread that could put.
Mechanism: lock held across a blocking queue get, one process, two threads: the lock's owner waits
for an item that only the lock's waiter would put (a lock/queue cycle, not a dead producer).
Truth: hang; culprit BatchFeeder's `next_batch` thread (holding `_state_lock` at `with
self._state_lock:` while `_take`'s `self.q.get()` waits); the decode thread is the victim at its
`with self._state_lock:`. Fix: take from the queue outside the lock (or give the producer its own
lock). Driver in ray.get(next_batch).
"""
import os
import queue
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class BatchFeeder:
    def __init__(self, n_records=400):
        self._state_lock = threading.Lock()
        self.q: queue.Queue = queue.Queue()
        self.cursor = 0
        self.n_records = n_records
        threading.Thread(target=self._decode, name="decode", daemon=True).start()

    def _decode(self):
        for i in range(self.n_records):
            time.sleep(0.3)  # decode one record
            rec = {"id": i, "pixels": [i % 255] * 64}
            with self._state_lock:
                self.cursor = i + 1
            self.q.put(rec)

    def _take(self, n):
        return [self.q.get() for _ in range(n)]

    def next_batch(self, n=4):
        with self._state_lock:
            batch = self._take(n)
            return {"cursor": self.cursor, "ids": [r["id"] for r in batch]}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    feeder = BatchFeeder.remote()
    print("READY: driver -> BatchFeeder.next_batch in a loop (get() under _state_lock)", flush=True)
    step = 0
    while True:
        b = ray.get(feeder.next_batch.remote())
        step += 1
        print(f"step {step}: batch {b['ids']}", flush=True)


if __name__ == "__main__":
    main()
