"""Healthy: every slot of an async actor awaits a token of a rate-limit bucket refilled every 20 s.

Scenario: a LabelingClient async actor (max_concurrency=4) sends samples to an external labeling
API whose quota is one request per 20 s. Each `label()` call awaits a token from an
`asyncio.Queue` that a refill task (started on the first call) tops up with one token every 20 s;
then it "calls the API" (asyncio.sleep(0.1)). The driver submits 10 calls and waits on all of
them: at any time all 4 slots await a token, the other 6 calls are queued, and one completes
every 20 s (~3.5 minutes in all). Nothing is logged.

Mechanism (none: healthy): a rate limiter: async slots awaiting a resource that a timer refills.
Truth: no hang. A right diagnosis is no-hang or inconclusive; async-await-stuck /
event-setter-queued / a hang naming LabelingClient is a false hang.
"""
# redteam-settle: 25
import asyncio
import os

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class LabelingClient:
    def __init__(self, period_s: float):
        self.period_s = period_s
        self.tokens: asyncio.Queue | None = None
        self.refill: asyncio.Task | None = None
        self.done = 0

    async def _refill(self) -> None:
        assert self.tokens is not None
        while True:
            await asyncio.sleep(self.period_s)
            self.tokens.put_nowait(1)

    async def label(self, sample: str) -> str:
        if self.tokens is None:
            self.tokens = asyncio.Queue()
            self.refill = asyncio.get_running_loop().create_task(self._refill())
        await self.tokens.get()
        await asyncio.sleep(0.1)
        self.done += 1
        return sample.upper()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    client = LabelingClient.remote(20.0)
    refs = [client.label.remote(f"sample-{i}") for i in range(10)]
    print("READY labeling", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
