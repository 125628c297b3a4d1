"""An async actor's result callback is posted to the event loop captured in __init__, which never runs.

Scenario: Embedder (an async Ray actor) talks to a native-style client whose replies arrive on the
client's own callback thread ("embed-cb", like a gRPC / Kafka consumer callback). The wrapper keeps
`self._loop = asyncio.new_event_loop()` from __init__ ("the loop to deliver callbacks on"), and
embed() awaits a future made on the running loop; the callback thread resolves it with
`self._loop.call_soon_threadsafe(fut.set_result, vec)`. But Ray runs async actor methods on its
own event loop in another thread: `self._loop` is a loop that no thread runs, so the set_result
callback sits in its ready queue forever. Every embed() coroutine stays at `await fut`; the
callback thread is idle in queue.get (its work done); the driver waits in ray.get.

Mechanism: a coroutine awaits an asyncio Future whose resolution was scheduled with
call_soon_threadsafe onto a different event loop (one captured in __init__, never run): the
future belongs to the running loop, the wake-up to a dead one.
Truth: culprit Embedder.__init__'s loop capture (`self._loop = asyncio.new_event_loop()`, the
callback posts to it); fix: capture `asyncio.get_running_loop()` inside the async method (or
`fut.get_loop().call_soon_threadsafe`).
"""
import asyncio
import os
import queue
import threading

import ray


@ray.remote(num_cpus=1)
class Embedder:
    def __init__(self):
        self._loop = asyncio.new_event_loop()
        self._requests = queue.Queue()
        threading.Thread(target=self._callback_thread, name="embed-cb", daemon=True).start()

    def _callback_thread(self):
        while True:
            fut, text = self._requests.get()
            vec = [float(len(text)), float(sum(map(ord, text)) % 97)]
            self._loop.call_soon_threadsafe(fut.set_result, vec)

    async def embed(self, text):
        fut = asyncio.get_running_loop().create_future()
        self._requests.put((fut, text))
        return await fut


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    e = Embedder.remote()
    refs = [e.embed.remote(t) for t in ["query one", "query two", "query three"]]
    print("READY: driver -> Embedder.embed x3 (futures resolved via call_soon_threadsafe on an unrun loop)",
          flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
