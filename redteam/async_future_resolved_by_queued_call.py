"""An async actor's two slots await asyncio.Futures that only a later call, queued behind them, resolves.

Scenario: ResultBoard (an async actor, max_concurrency=2) pairs requests with results:
`wait_result(job)` creates `self.pending[job] = loop.create_future()` (if absent) and awaits it;
`publish(job, value)` resolves it with `set_result`. The driver submits the two evaluation waits
first ("so they are registered before the results arrive"), then a third wait and then the two
`publish` calls. Ray admits two calls at a time to an async actor with max_concurrency=2: the two
first waits take both slots; the third wait and both publishes stay queued behind them
(SUBMITTED_TO_WORKER). Nothing resolves the futures.
Mechanism: await on an asyncio.Future resolved only by a call that cannot be scheduled (the
actor's concurrency is used up by its waiters).
Truth: hang; culprit ResultBoard (its `wait_result` calls occupy both slots while `publish`, the
resolver, is queued); fix: raise max_concurrency or put the publish path in its own concurrency
group. Driver in ray.get(waits).
"""
import asyncio
import os
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class ResultBoard:
    def __init__(self):
        self.pending = {}

    def _future(self, job):
        if job not in self.pending:
            self.pending[job] = asyncio.get_running_loop().create_future()
        return self.pending[job]

    async def wait_result(self, job):
        value = await self._future(job)
        return {"job": job, "value": value}

    async def publish(self, job, value):
        self._future(job).set_result(value)
        return job


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    board = ResultBoard.remote()
    ray.get(board.__ray_ready__.remote())
    waits = [board.wait_result.remote(j) for j in ("eval-a", "eval-b", "eval-c")]
    time.sleep(1)
    pubs = [board.publish.remote(j, 0.9 - i / 10) for i, j in enumerate(("eval-a", "eval-b", "eval-c"))]
    print("READY: driver -> ResultBoard.wait_result x3 (publish calls queued behind both slots)", flush=True)
    print(ray.get(waits), ray.get(pubs))


if __name__ == "__main__":
    main()
