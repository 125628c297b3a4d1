"""HEALTHY: a writer thread that sleeps between records (paced uploads) while a joiner waits in Queue.join().

Scenario: Ingestor (an actor) runs a two-stage pipeline on queue.Queues: two parser threads take
records from `q` and hand them to `out`; one writer thread takes from `out`, uploads each record
(a 0.5 s sleep: the stand-in for a rate-limited upload) and then calls `q.task_done()`. `ingest`
puts 240 records and waits in `q.join()`. The parsers sit idle in `q.get()`, the joiner in
`Queue.join`, the writer in `time.sleep(0.5)` in a `while True:` loop - the picture of a poll that
never ends - but every round takes the next record and marks one done: join returns after ~120 s.

Mechanism: none (paced work). Written by h-queues: this shape was called
`hang / poll-never-satisfied 0.95` (the sleeping writer stood for its process and was read as a
poll whose condition never comes, from a one-second window).
Truth: healthy; the tool must not say hang (no-hang or inconclusive).
"""
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
            self.out.get()
            time.sleep(0.5)  # upload the record
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
    ref = a.ingest.remote(240)
    print("READY ingesting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
