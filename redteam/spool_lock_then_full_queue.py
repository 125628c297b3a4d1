"""A writer thread blocks on a full queue while holding the lock the reader needs before it reads.

Scenario: a LogSpooler actor buffers records for a sink. `append()` (called by the driver) takes
`self._lock` (which guards a byte counter) and, still holding it, puts the record into
`self._q = queue.Queue(maxsize=4)`. A background `drain` thread takes `self._lock` to update the
counter and only then `get()`s from the queue. Once the queue is full, the appending call waits in
`Queue.put` holding the lock; the drain thread waits at `with self._lock:`: neither can go on.
The driver waits in `ray.get(spooler.append.remote(...))`.

Mechanism: a lock-queue cycle inside one process: the lock's owner waits for room in a queue that
only the lock's waiter empties.
Truth: culprit LogSpooler (its append thread, blocked in put while owning `_lock`); fix: put
outside the lock (or get before taking the lock in the drain thread).
"""
import os
import queue
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class LogSpooler:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._q: queue.Queue = queue.Queue(maxsize=4)
        self.bytes = 0
        self.sent = 0
        threading.Thread(target=self.drain, name="drain", daemon=True).start()

    def drain(self) -> None:
        while True:
            time.sleep(0.5)  # the sink is slow to accept
            with self._lock:
                self.bytes -= 1
                record = self._q.get()
            self.sent += 1
            if record is None:
                return

    def append(self, record: str) -> int:
        with self._lock:
            self.bytes += len(record)
            self._q.put(record)
        return self.bytes


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    spooler = LogSpooler.remote()
    print("READY: spooling records", flush=True)
    for i in range(10_000):
        ray.get(spooler.append.remote(f"record {i} " + "x" * 64))
        if i % 10 == 0:
            print(f"appended {i}", flush=True)


if __name__ == "__main__":
    main()
