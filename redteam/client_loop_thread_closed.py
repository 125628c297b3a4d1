"""A sync feature client submits coroutines to its private event loop after reconnect() stopped it.

Scenario: FeatureClient (a common pattern in sync wrappers of async SDKs) runs a private asyncio loop
in a daemon thread ("feature-io") and exposes sync methods that do
`asyncio.run_coroutine_threadsafe(coro, self._loop).result()`. reconnect() "restarts the session":
it stops the loop (`loop.call_soon_threadsafe(loop.stop)`), joins the io thread, makes a new
session object — and forgets to start a new loop thread. `self._loop` is still the old loop object,
not running and not closed, so run_coroutine_threadsafe accepts the coroutine (it only schedules a
callback with call_soon_threadsafe) and returns a concurrent.futures.Future that nothing will
ever run. The actor's lookup() thread waits in Future.result() (a Condition wait) with no timeout;
the driver waits in ray.get. No thread of the process runs the loop.

Mechanism: a wait on a concurrent Future whose completion is a callback scheduled on an event loop
that no thread runs any more (its thread exited after loop.stop()).
Truth: culprit FeatureClient.reconnect (stopped the loop and never started a new runner thread);
fix: start a new loop thread in reconnect (or check `loop.is_running()` / use `.result(timeout=)`).
"""
import asyncio
import os
import threading

import ray


class FeatureClient:
    def __init__(self):
        self._start_loop()
        self.session = {"id": 1}

    def _start_loop(self):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="feature-io", daemon=True)
        self._thread.start()

    async def _fetch(self, keys):
        await asyncio.sleep(0.01)
        return {k: len(k) for k in keys}

    def fetch(self, keys):
        return asyncio.run_coroutine_threadsafe(self._fetch(keys), self._loop).result()

    def reconnect(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self.session = {"id": self.session["id"] + 1}
        # bug: no self._start_loop() — self._loop is a stopped loop nobody runs


@ray.remote(num_cpus=1)
class FeatureService:
    def __init__(self):
        self.client = FeatureClient()

    def lookup(self, batches):
        out = []
        for i, keys in enumerate(batches):
            if i == 2:
                self.client.reconnect()
                print("reconnected, session", self.client.session, flush=True)
            out.append(self.client.fetch(keys))
        return out


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    svc = FeatureService.remote()
    ref = svc.lookup.remote([["user:1", "item:2"]] * 5)
    print("READY: driver -> FeatureService.lookup -> Future.result() of a coroutine on a stopped loop", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
