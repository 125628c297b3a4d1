"""cf.wait(FIRST_COMPLETED) on downloads queued behind service loops that occupy the whole thread pool.

Scenario: a ShardFetcher actor shares one `ThreadPoolExecutor(max_workers=2)` for everything. At
start it submits two long-running watchers (`_watch_lease`, `_watch_config`): service loops that
run until shutdown, each waking every second on `stop.wait(1)` to check something. Later `fetch`
submits three shard downloads to the same pool and calls
`concurrent.futures.wait(futs, return_when=FIRST_COMPLETED)` without a timeout. The two workers
never free up (their loops end only at shutdown), so the downloads stay PENDING in the executor's
work queue forever. The watchers look alive (they wake every second).

Mechanism: a wait on futures that can never start: the pool's every worker is taken by a task
that never ends (pool exhaustion by loops that run until shutdown), the work sits in the queue.
Truth: hang; culprit the two watchers submitted to the shared pool (`self.pool.submit(self._watch_…)`
in `__init__`), the `wait(FIRST_COMPLETED)` in `fetch` is the victim. Fix: run service loops on
their own threads (or a bigger/separate pool), or wait with a timeout.
"""
import concurrent.futures as cf
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class ShardFetcher:
    def __init__(self):
        self.pool = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="fetch")
        self.stop = threading.Event()
        self.lease_ok = True
        self.config = {}
        self.pool.submit(self._watch_lease)
        self.pool.submit(self._watch_config)

    def _watch_lease(self):
        n = 0
        while not self.stop.wait(1):
            n += 1
            self.lease_ok = n >= 0

    def _watch_config(self):
        n = 0
        while not self.stop.wait(1):
            n += 1
            self.config["gen"] = n

    def _download(self, i):
        return bytes(1024 * (i + 1))

    def fetch(self, n):
        futs = [self.pool.submit(self._download, i) for i in range(n)]
        print("READY: 3 downloads submitted, waiting FIRST_COMPLETED", flush=True)
        done, _ = cf.wait(futs, return_when=cf.FIRST_COMPLETED)
        return sum(len(f.result()) for f in done)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    f = ShardFetcher.remote()
    print(ray.get(f.fetch.remote(3)))


if __name__ == "__main__":
    main()
