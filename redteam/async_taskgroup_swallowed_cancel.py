"""An asyncio.TaskGroup waits forever for a child that swallows its cancellation and waits for a flush.

Scenario: Ingest (an async actor) fetches shards concurrently in `async with asyncio.TaskGroup()`;
each child fetches and writes its shard. A writer child catches `asyncio.CancelledError` "to flush
what it has" and then awaits `self.flushed` (an asyncio.Event) that the group's own flusher child
sets. One fetch raises (bad shard): the TaskGroup cancels every child, including the flusher, which
dies cancelled; the writers swallow their CancelledError and await `self.flushed`, which nobody will
set. `TaskGroup.__aexit__` awaits its children forever.
Mechanism: the actor's event loop is idle; the `ingest` coroutine is suspended in `TaskGroup.__aexit__`
(`_on_completed_fut`), the two writer tasks are suspended in `Event.wait` on `flushed`; the only code
that sets it (the flusher task) is done (cancelled). Driver in ray.get(ingest).
Truth: culprit Ingest._write (swallows CancelledError and awaits after cancellation); fix: re-raise
CancelledError (flush synchronously or with a timeout, then `raise`).
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class Ingest:
    def __init__(self):
        self.flushed = asyncio.Event()
        self.rows = []

    async def _fetch(self, i):
        await asyncio.sleep(0.5 + 0.1 * i)
        if i == 3:
            raise ValueError(f"shard {i}: bad checksum")
        return list(range(i * 10, i * 10 + 10))

    async def _write(self, i):
        try:
            while True:
                await asyncio.sleep(0.2)
                self.rows.append(i)
        except asyncio.CancelledError:
            print(f"writer {i}: cancelled, waiting for the flush first", flush=True)
            await self.flushed.wait()
            print(f"writer {i}: flushed", flush=True)

    async def _flusher(self):
        await asyncio.sleep(3600)  # flushes on the hour
        self.flushed.set()

    async def ingest(self):
        try:
            async with asyncio.TaskGroup() as tg:
                for i in range(5):
                    tg.create_task(self._fetch(i))
                tg.create_task(self._write(0))
                tg.create_task(self._write(1))
                tg.create_task(self._flusher())
        except Exception as eg:  # noqa: BLE001 - the TaskGroup raises an ExceptionGroup of the failed fetch
            print("ingest failed:", repr(eg), flush=True)
        return len(self.rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ing = Ingest.remote()
    ref = ing.ingest.remote()
    print("READY: driver -> Ingest.ingest (TaskGroup.__aexit__ waits for writers that swallowed the cancel)",
          flush=True)
    print("rows", ray.get(ref))


if __name__ == "__main__":
    main()
