"""Two calls of one async actor take two asyncio.Locks in opposite orders: each awaits the lock the other holds.

Scenario: a ParamStore async actor guards its weights and its optimizer state with two
`asyncio.Lock`s. `push_grads` takes `weights_lock` then (after an await on the apply step)
`opt_lock`; `snapshot` takes `opt_lock` then `weights_lock`. The driver calls both at once; each
coroutine holds one lock and awaits the other. The event loop is idle (nothing runs), py-spy shows
no coroutine frame, no error, both calls RUNNING forever.

Mechanism: an asyncio lock-order deadlock between two coroutines of one event loop.
Truth: hang; culprit ParamStore (push_grads and snapshot, the opposite lock orders). Fix: one
lock order everywhere (or one lock).
"""
import asyncio
import os

import ray


@ray.remote(num_cpus=1)
class ParamStore:
    def __init__(self):
        self.weights_lock = asyncio.Lock()
        self.opt_lock = asyncio.Lock()
        self.version = 0

    async def push_grads(self, step: int) -> int:
        async with self.weights_lock:
            await asyncio.sleep(0.5)  # apply the gradients
            async with self.opt_lock:
                self.version += 1
                return self.version

    async def snapshot(self) -> int:
        async with self.opt_lock:
            await asyncio.sleep(0.5)  # copy the optimizer state
            async with self.weights_lock:
                return self.version


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = ParamStore.remote()
    refs = [store.push_grads.remote(1), store.snapshot.remote()]
    print("READY training", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
