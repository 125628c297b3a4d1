"""An async actor re-waits on an asyncio.Event with wait_for timeouts; the only task that sets it died.

Scenario: Warmer (an async actor) starts a background warm-up task in its first call
(`asyncio.create_task(self._warm())`) that loads shards and sets `self.warm` (an asyncio.Event)
when done. The task raises KeyError on shard 3 (never awaited or supervised: the exception is
only logged when the Task is garbage-collected). `ready()` loops `while True: try: await
asyncio.wait_for(self.warm.wait(), timeout=5); break; except asyncio.TimeoutError: print("still
warming")` -- a timer fires every 5 s, so the loop looks like a live poll.
Mechanism: an async re-wait on an Event whose only setter (a task of the actor) is gone; the
timeout only repeats the wait.
Truth: hang; culprit Warmer (`_warm` died at its KeyError, so `self.warm.set()` never runs);
fix: supervise the task (add_done_callback / TaskGroup), fail ready() on its error.
Driver in ray.get(ready).
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1)
class Warmer:
    def __init__(self):
        self.warm = asyncio.Event()
        self.shards = {}
        self.task = None

    async def start(self):
        self.task = asyncio.create_task(self._warm())
        return "started"

    async def _warm(self):
        sizes = {0: 10, 1: 20, 2: 30, 4: 50}
        for shard in range(5):
            await asyncio.sleep(0.2)
            self.shards[shard] = sizes[shard]  # shard 3 is missing: KeyError
        self.warm.set()

    async def ready(self):
        while True:
            try:
                await asyncio.wait_for(self.warm.wait(), timeout=5)
                break
            except asyncio.TimeoutError:
                print(f"still warming: {len(self.shards)} shards", flush=True)
        return len(self.shards)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = Warmer.remote()
    ray.get(w.start.remote())
    ref = w.ready.remote()
    print("READY: driver -> Warmer.ready (re-waits on warm; _warm died)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
