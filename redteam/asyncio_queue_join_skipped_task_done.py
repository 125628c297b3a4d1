"""Async actor awaits asyncio.Queue.join(); the live consumer skips task_done() on one path.

Scenario: an async IndexWriter actor buffers documents in an `asyncio.Queue`; a background
consumer coroutine (alive, healthy) does `doc = await self.q.get()`, and for an empty document
`continue`s to the next item before reaching `self.q.task_done()` (the `task_done` sits at the end
of the loop body, not in a `finally`). `flush()` puts 20 documents (two are empty) and then
`await self.q.join()`: the queue is empty, the consumer idles in `q.get()`, but `_unfinished_tasks`
stays at 2, so join never returns. The driver waits on `flush`.

Mechanism: a queue join whose unfinished-task counter can never reach zero: every item was got,
the consumer lives, but two gets were never matched by task_done (a counter leaked on a skip path).
Truth: hang; culprit IndexWriter's `_consume` (the `continue` that skips `self.q.task_done()`);
the `await self.q.join()` in `flush` is where it shows. Fix: call task_done in a `finally`.
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class IndexWriter:
    def __init__(self):
        self.q = asyncio.Queue()
        self.index = {}
        self.consumer = None

    async def _consume(self):
        while True:
            doc = await self.q.get()
            if not doc["text"]:
                continue
            for tok in doc["text"].split():
                self.index.setdefault(tok, []).append(doc["id"])
            self.q.task_done()

    async def flush(self, n):
        if self.consumer is None:
            self.consumer = asyncio.get_running_loop().create_task(self._consume())
        for i in range(n):
            await self.q.put({"id": i, "text": "" if i in (7, 13) else f"doc {i} token{i % 5}"})
        print("READY: 20 docs queued, awaiting q.join()", flush=True)
        await self.q.join()
        return len(self.index)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = IndexWriter.remote()
    print(ray.get(w.flush.remote(20)))


if __name__ == "__main__":
    main()
