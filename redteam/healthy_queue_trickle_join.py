"""HEALTHY: Queue.join() while the consumers sit idle in get(): a live downstream stage marks the items done.

Scenario: Ingestor (an actor) runs a two-stage pipeline on queue.Queues: two parser threads take
records from `q` and hand them to `out`; one writer thread takes from `out`, checksums each record
(a checksum chain, 0.4 s of CPU) and only then calls `q.task_done()` (a record counts as done once written). `ingest`
puts 300 records and waits in `q.join()`. The parsers drain `q` at once and sit idle in
`q.get()`; the joiner waits in `Queue.join` - the picture of a Queue.join whose task_done was
skipped - but the writer is alive (computing) and marks one record done every 0.4 s: join
returns after ~120 s.

Mechanism: none (a slow last stage). Written by h-queues as the counterfactual of
dedup_worker_queue: a live thread that can still call task_done (or put) means the join may finish.
Truth: healthy; the tool must not say hang (no-hang or inconclusive).
"""
import hashlib
import os
import queue
import threading
import time

import ray


@ray.remote(num_cpus=0.1)
class Ingestor:
    def __init__(self):
        self.q: queue.Queue[int] = queue.Queue()
        self.out: queue.Queue[int] = queue.Queue()
        self.written = 0
        for _ in range(2):
            threading.Thread(target=self._parse, daemon=True).start()
        threading.Thread(target=self._write, daemon=True).start()

    def _parse(self) -> None:
        while True:
            rec = self.q.get()
            self.out.put(rec * 2)

    def _write(self) -> None:
        while True:
            rec = self.out.get()
            digest, until = rec.to_bytes(8, "little"), time.monotonic() + 0.4
            while time.monotonic() < until:  # checksum the record (0.4 s of CPU) before it counts as written
                digest = hashlib.sha256(digest).digest()
            self.written += 1
            self.q.task_done()

    def ingest(self, n: int) -> int:
        for i in range(n):
            self.q.put(i)
        self.q.join()
        return self.written


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    a = Ingestor.remote()
    ref = a.ingest.remote(300)
    print("READY ingesting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
