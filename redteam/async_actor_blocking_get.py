"""An async actor calls the blocking ray.get inside a coroutine; the callee calls back into it.

Mechanism: Router is an async actor (max_concurrency=100). Router.route awaits nothing: it calls
ray.get(ranker.rank.remote(...)) synchronously, which blocks Router's only event-loop thread.
Ranker.rank needs a feature from the router: ray.get(router.features.remote(q)). features is a
coroutine of Router, so it can only run on the loop that route is blocking. Cycle: Router (loop
blocked in ray.get) -> Ranker.rank -> Router.features (queued on the blocked loop).
Truth: culprit Router.route (a blocking ray.get inside an async method); fix: `await
ranker.rank.remote(...)` (ObjectRefs are awaitable), or move the features lookup out of the router.
"""
import os

import ray


@ray.remote(num_cpus=0.1)
class Ranker:
    def __init__(self, router):
        self.router = router

    def rank(self, q):
        feats = ray.get(self.router.features.remote(q))
        return sorted(feats)


@ray.remote(num_cpus=0.1, max_concurrency=100)
class Router:
    def __init__(self):
        self.ranker = None

    async def set_ranker(self, ranker):
        self.ranker = ranker

    async def features(self, q):
        return [len(q), 3, 1]

    async def route(self, q):
        return ray.get(self.ranker.rank.remote(q))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    router = Router.remote()
    ranker = Ranker.remote(router)
    ray.get(router.set_ranker.remote(ranker))
    print("READY: driver -> Router.route (async, blocking ray.get) -> Ranker.rank -> Router.features", flush=True)
    print(ray.get(router.route.remote("query")))


if __name__ == "__main__":
    main()
