"""A sync wrapper submits coroutines to a background event loop whose thread was never started.

Scenario: EmbeddingClient wraps an async HTTP-style client: `__init__` creates
`self.loop = asyncio.new_event_loop()` and a `threading.Thread(target=self.loop.run_forever)`
that `connect()` was supposed to start; `embed()` calls
`asyncio.run_coroutine_threadsafe(self._embed(batch), self.loop).result()`. The driver calls
`embed` without `connect` (the start moved there in a refactor). The coroutine is scheduled on a
loop that nobody runs; the Future is never completed. Because the class has an `async def`,
Ray runs it as an async actor: `embed` (a sync method) runs on Ray's own event-loop thread
("AsyncIO Thread: default") in `concurrent.futures.Future.result` → `Condition.wait` (no timeout)
and does block that loop — but that is not why it hangs: the Future belongs to `self.loop`, a
different loop, which no thread runs (the one thread meant to run it was never started).

Mechanism: a cross-thread Future bound to an event loop that is not running (no thread runs it).
Truth: culprit EmbeddingClient (its loop thread is never started: embed() before connect()).
Fix: start the loop thread in `__init__` (or check `self.loop.is_running()`), and give
`.result()` a timeout.
"""
import asyncio
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class EmbeddingClient:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="embed-loop")

    def connect(self) -> None:
        self._thread.start()

    async def _embed(self, batch: list[str]) -> list[float]:
        await asyncio.sleep(0.01)
        return [len(s) / 10 for s in batch]

    def embed(self, batch: list[str]) -> list[float]:
        fut = asyncio.run_coroutine_threadsafe(self._embed(batch), self.loop)
        return fut.result()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    c = EmbeddingClient.remote()
    ref = c.embed.remote(["query one", "query two"])
    print("READY embedding", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
