"""Queue.join() waits for a task_done that a consumer's error path skipped; the consumers are alive.

Scenario: Deduper (an actor) feeds JSON lines to two consumer threads through a queue.Queue and
waits in `q.join()` until all are processed. A consumer skips malformed lines with `continue`
before `task_done()`; one line of the batch is truncated. The queue is empty, both consumers idle
in `q.get()`, `unfinished_tasks` stays 1: join() waits forever. No exception is raised or logged.

Mechanism: a join counter that can never reach zero (a task_done skipped on an error path) while
every consumer thread is alive and idle in get() on an empty queue: nothing in the process will
notify `all_tasks_done`.
Truth: culprit Deduper (the consumer's `continue` path in `_consume` skipped task_done; the
waiter is Deduper.ingest in Queue.join); the driver is a victim. Fix: task_done in a `finally`.
"""
import json
import os
import queue
import threading

import ray


@ray.remote(num_cpus=0.1)
class Deduper:
    def __init__(self):
        self.q: queue.Queue[str] = queue.Queue()
        self.seen: set[int] = set()
        for _ in range(2):
            threading.Thread(target=self._consume, daemon=True).start()

    def _consume(self) -> None:
        while True:
            line = self.q.get()
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            self.seen.add(rec["id"])
            self.q.task_done()

    def ingest(self, lines: list[str]) -> int:
        for line in lines:
            self.q.put(line)
        self.q.join()
        return len(self.seen)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    d = Deduper.remote()
    lines = [json.dumps({"id": i % 40, "v": i}) for i in range(200)]
    lines[137] = lines[137][:9]  # one record truncated upstream
    ref = d.ingest.remote(lines)
    print("READY ingesting", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
