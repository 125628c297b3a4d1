"""A reader stops early and joins its prefetch thread, which waits to put into the full queue.

Scenario: SampleReader wraps a record generator in a prefetching iterator: a background thread
puts records into a queue.Queue(maxsize=8); `__next__` gets them. `head(n)` takes the first n
records (decoding each, slower than the producer) and calls `close()`, which sets a stop flag
and joins the thread. The thread checks the flag only between records, and is blocked in `q.put(...)` on the full queue (nobody reads any
more): close() waits in Thread.join forever.

Mechanism: a joiner that stopped consuming waits for a producer blocked on a bounded queue only
the joiner would drain (a consumer-gone wait hidden behind Thread.join).
Truth: culprit SampleReader's `close()` (joins without draining the queue or unblocking the put);
the prefetch thread in Queue.put is its victim, the driver too. Fix: drain the queue (or put with
a timeout and re-check the stop flag) before joining.
"""
import os
import queue
import threading
import time

import ray


class Prefetcher:
    def __init__(self, source, depth: int = 8):
        self.q: queue.Queue = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._fill, args=(source,), daemon=True)
        self.thread.start()

    def _fill(self, source) -> None:
        for rec in source:
            if self.stop.is_set():
                return
            self.q.put(rec)

    def __iter__(self):
        return self

    def __next__(self):
        return self.q.get()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


@ray.remote(num_cpus=0.1)
class SampleReader:
    def head(self, n: int) -> list[int]:
        it = Prefetcher(iter(range(1_000_000)))
        out = []
        for _ in range(n):
            out.append(next(it))
            time.sleep(0.2)  # decode + augment each record
        it.close()
        return out


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    r = SampleReader.remote()
    ref = r.head.remote(5)
    print("READY reading", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
