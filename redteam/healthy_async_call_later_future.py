"""Healthy: an async actor's calls await one asyncio Future that loop.call_later resolves minutes later.

Scenario: a RolloutGate async actor admits rollout workers only once the maintenance window of
the simulator farm ends. `arm(420)` creates a Future on the actor's event loop and schedules
`loop.call_later(420, fut.set_result, True)`; four `enter()` calls then `await` that Future and
return at once when it is resolved. No task sets it, no thread runs: the release is a TimerHandle
in the event loop's schedule. The driver waits on the four calls; nothing is logged, nothing
finishes for ~7 minutes.
Mechanism (none: healthy): coroutines awaiting a future whose resolution is scheduled on the loop's
timer heap (a scheduled release, no setter task).
Truth: no hang. A right diagnosis is no-hang or inconclusive; async-await-stuck /
future-never-set / a hang naming RolloutGate is a false hang.
"""
# redteam-settle: 25
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1, max_concurrency=8)
class RolloutGate:
    def __init__(self):
        self.opened = None

    async def arm(self, delay_s: float) -> bool:
        loop = asyncio.get_running_loop()
        self.opened = loop.create_future()
        loop.call_later(delay_s, self.opened.set_result, True)
        return True

    async def enter(self, worker: int) -> str:
        await asyncio.shield(self.opened)
        return f"worker {worker} admitted"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    gate = RolloutGate.remote()
    ray.get(gate.arm.remote(420.0))
    refs = [gate.enter.remote(i) for i in range(4)]
    print("READY gated", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
