"""An async actor's every concurrency slot awaits a condition that only a later call, queued behind them, would set.

Scenario
    A ``GradAccumulator`` async actor (``max_concurrency=2``) collects gradients from workers:
    ``pull(step)`` awaits an ``asyncio.Condition`` until the step's averaged gradient is
    published; ``push(step, grad)`` adds a gradient and, once all parts are in, notifies. The
    driver asks for two pulls, then one push.

Mechanism
    An async actor runs at most ``max_concurrency`` calls at a time, awaiting ones included. Both
    slots are taken by ``pull`` calls suspended in ``await cond.wait_for(...)``; ``push`` is the
    only call that could notify them, and it stays queued
    (``PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY``) until a slot frees. The event loop is idle.

What misleads
    py-spy shows no frame of an awaiting coroutine: the actor's loop thread sits in
    ``select``, as if idle; the State API says both ``pull`` calls are RUNNING. The pusher and the
    pullers look like victims of each other; nothing is blocked in a thread.

Expected diagnosis
    ``event-setter-queued``: GradAccumulator's 2 concurrency slots are held by RUNNING ``pull``
    calls awaiting in the event loop while ``push`` (the call that would notify them) is queued
    behind them. Fix: max_concurrency above the number of waiters, or wait outside the actor.
"""

import asyncio
import os

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "event-setter-queued",
    "culprits": [{"class_name": "GradAccumulator", "rank": None}],
    "notes": "async actor, max_concurrency=2: two pull calls await an asyncio.Condition that only "
    "push notifies; push is queued (PENDING_ACTOR_TASK_ORDERING_OR_CONCURRENCY) behind them.",
}


@ray.remote(num_cpus=0.25, max_concurrency=2)
class GradAccumulator:
    def __init__(self, parts: int):
        self.parts = parts
        self.grads: dict = {}
        self.ready = asyncio.Condition()

    async def push(self, step: int, grad: float) -> int:
        async with self.ready:
            self.grads.setdefault(step, []).append(grad)
            self.ready.notify_all()
        return len(self.grads[step])

    async def pull(self, step: int) -> float:
        async with self.ready:
            await self.ready.wait_for(lambda: len(self.grads.get(step, [])) >= self.parts)
            return sum(self.grads[step]) / self.parts


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    acc = GradAccumulator.remote(parts=1)
    ray.get(acc.__ray_ready__.remote())
    # One caller's calls reach the actor in order: both pulls take the two slots, then the push.
    pulls = [acc.pull.remote(0) for _ in range(2)]
    pushed = acc.push.remote(0, 1.0)
    print("READY: 2 pulls of step 0, then one push", flush=True)
    print(ray.get(pulls), ray.get(pushed), flush=True)


if __name__ == "__main__":
    main()
