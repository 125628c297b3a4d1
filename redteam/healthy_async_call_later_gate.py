"""Healthy: an async actor's calls await an asyncio.Event opened by a loop.call_later timer (~3 min away).

Scenario: ModelGate (an async actor) serves `infer` only once the model's licence window opens:
`__init__` schedules `asyncio.get_event_loop().call_later(delay, self.open.set)` (no task, no
thread: a TimerHandle in the event loop's schedule), and every `infer` awaits `self.open.wait()`.
Four rollout calls arrive before the window; they all complete ~3 minutes later.
Mechanism: the event loop thread is idle in its selector with a timeout (the scheduled timer); the
four `infer` coroutines are suspended in `Event.wait` on `open`; no coroutine or thread of the process
is running that could set it — the setter is the loop's own timer callback `Event.set`, due at
`loop.time() + delay`. Driver in ray.get.
Truth: healthy (no culprit): the calls return ~180 s after the actor started. A hang verdict is wrong.
"""
import asyncio
import os
import time

import ray


@ray.remote(num_cpus=0.5)
class ModelGate:
    def __init__(self, delay_s):
        self.open = asyncio.Event()
        self.t0 = time.time()
        self._timer = None
        self.delay_s = delay_s

    async def arm(self):
        self._timer = asyncio.get_running_loop().call_later(self.delay_s, self.open.set)
        return self.delay_s

    async def infer(self, x):
        await self.open.wait()
        print(f"infer {x} after {time.time() - self.t0:.0f} s", flush=True)
        return x * 2


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    gate = ModelGate.remote(180.0)
    ray.get(gate.arm.remote())
    refs = [gate.infer.remote(i) for i in range(4)]
    print("READY: driver -> ModelGate.infer x4 (await an Event a loop.call_later timer sets in ~180 s)",
          flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
