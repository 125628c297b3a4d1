"""An async actor's calls await an asyncio.Event that a plain thread sets: the loop is never woken.

Scenario: ModelServer (an async actor) loads its weights in a background `threading.Thread`
started in `__init__`; when done the thread calls `self.loaded.set()` on an `asyncio.Event`
directly, not through `loop.call_soon_threadsafe`. asyncio objects are not thread-safe:
Event.set() marks the event and schedules the waiters' wake-up with `call_soon`, which from a
foreign thread appends to the loop's ready queue without writing the loop's self-pipe. The loop
sits in `select()` with no timeout; with no other callback, timer or call arriving, it never
looks at its ready queue, and `await self.loaded.wait()` in predict() stays suspended although
`self.loaded.is_set()` is True. The loader thread has exited. The driver waits in ray.get.

Mechanism: a wake-up posted to an event loop from another thread without waking the loop
(not thread-safe asyncio call): the event is set, the waiter is never resumed.
Truth: culprit ModelServer._load (calls asyncio.Event.set() from a thread). Fix:
`self.loop.call_soon_threadsafe(self.loaded.set)` (capture the loop in an async method), or a
threading.Event polled with asyncio.to_thread.
"""
import asyncio
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.5)
class ModelServer:
    def __init__(self):
        self.loaded = asyncio.Event()
        self.weights = None
        threading.Thread(target=self._load, name="weight-loader", daemon=True).start()

    def _load(self):
        time.sleep(5)  # "download" the weights
        self.weights = [0.5] * 1024
        print("loader: weights ready, setting the event", flush=True)
        self.loaded.set()

    async def predict(self, x):
        await self.loaded.wait()
        return sum(w * x for w in self.weights)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    srv = ModelServer.remote()
    ref = srv.predict.remote(2.0)
    print("READY: driver -> ModelServer.predict (awaits an asyncio.Event set from a thread)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
