"""Healthy: a writer's bounded queue is full, its only consumer thread is slow (and backs off on a retry) but drains.

Scenario: the twin of retry_requeue_full_queue. An actor ships feature rows to a warehouse.
submit() puts batches into a bounded queue.Queue(maxsize=4); one consumer thread takes a batch,
encodes it (~5 s of pure-Python work per batch) and sends it. When a send fails (the warehouse
rejects an oversized batch), the consumer keeps the batch in a local retry list (never back into
its own queue) and retries it after a back-off sleep of 1, 2, 4 s, splitting it in halves. The
driver submits 40 batches at once, far faster than the sink drains, so the queue stays full and
the 4 executor threads sit in put(): the snapshot shows submit() blocked at `self.q.put(batch)`
and the consumer either computing in `_encode` or sleeping in the retry back-off.

Mechanism: producers wait for room in a full bounded queue whose only getter is alive: it is
working between gets (its stack and loop state move) or in a timed back-off sleep; every get frees
a slot and lets one put through.
Truth: healthy (no hang); all 40 batches are sent in ~3.5-4 min. A right answer is no-hang, or
inconclusive naming the consumer; "hang" is a false hang, and naming submit()'s put a culprit is
wrong.
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
        self.retry: list = []
        threading.Thread(target=self._consume, name="warehouse-consumer", daemon=True).start()

    def _encode(self, batch, seconds):
        t0, acc, i = time.monotonic(), 0, 0
        while time.monotonic() - t0 < seconds:
            acc = (acc * 31 + batch[i % len(batch)] + i) % 1_000_003
            i += 1
        return acc

    def _send(self, batch):
        if len(batch) > 500:
            raise ValueError("batch over the size quota")
        self.sent += len(batch)

    def _consume(self):
        backoff = 1.0
        while True:
            batch = self.retry.pop() if self.retry else self.q.get()
            self._encode(batch, 5.0)
            try:
                self._send(batch)
                backoff = 1.0
            except ValueError:
                half = len(batch) // 2
                self.retry += [batch[:half], batch[half:]]
                time.sleep(backoff)
                backoff = min(backoff * 2, 4.0)

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
        n = 800 if i in (3, 4) else 100
        refs.append(w.submit.remote([i] * n))
    time.sleep(8)
    print("READY: queue full, submits blocked in put, the consumer encodes and drains", flush=True)
    print(ray.get(refs), ray.get(w.count.remote()))


if __name__ == "__main__":
    main()
