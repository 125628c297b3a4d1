"""An async retrieval router calls the blocking ray.get in a coroutine; the ranker calls back into it.

Scenario
    A retrieval service: an async ``Router`` actor (``max_concurrency=100``, so it "can take many
    calls at once") receives queries and asks a ``Ranker`` actor to rank candidates. The ranker
    needs per-query features that only the router holds, so ``Ranker.rank`` calls back
    ``router.features``. The code was ported from a threaded router: ``Router.route`` still does
    ``ray.get(self.ranker.rank.remote(q))`` inside ``async def``. The driver waits on
    ``route`` in ``ray.get``.

Mechanism
    An async actor runs every coroutine on one event-loop thread. The blocking ``ray.get`` in
    ``route`` holds that thread until ``Ranker.rank`` returns; ``rank`` waits in ``ray.get`` on
    ``Router.features``, a coroutine that can only run on the loop ``route`` is blocking. The
    State API shows ``Router.features`` RUNNING (handed to the loop, never started); nothing
    fails, nothing times out.

What misleads
    The router has 100 concurrency slots and ``features`` is RUNNING, so the call back "should
    have been served"; and the two actors calling each other read as a plain call cycle, whose
    fix would be a new design. Wrong: the cycle exists only because ``route`` blocks the event
    loop — ``await self.ranker.rank.remote(q)`` would let ``features`` run on the same loop.

Expected diagnosis
    ``async-loop-blocked``: a cycle Router -> Ranker.rank -> Router.features in which Router's
    event-loop thread is blocked in ``ray.get`` inside the coroutine ``Router.route``. Culprit:
    Router (named first; await the ref instead of ``ray.get``), then Ranker. The driver waits
    on ``route``.
"""

import os

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "async-loop-blocked",
    "culprits": [{"class_name": "Router", "rank": None}],
    "notes": "Router.route (async def) calls the blocking ray.get on Ranker.rank, which calls back "
    "Router.features; features cannot run on Router's blocked event loop; driver in ray.get on route.",
}


@ray.remote(num_cpus=0.1)
class Ranker:
    def __init__(self, router):
        self.router = router

    def rank(self, query: str) -> list:
        features = ray.get(self.router.features.remote(query))
        return sorted(range(len(features)), key=lambda i: -features[i])


@ray.remote(num_cpus=0.1, max_concurrency=100)
class Router:
    def __init__(self):
        self.ranker = None
        self.clicks = {"ray": 3.0, "hang": 1.0}

    async def set_ranker(self, ranker) -> None:
        self.ranker = ranker

    async def features(self, query: str) -> list:
        return [self.clicks.get(w, 0.0) for w in query.split()]

    async def route(self, query: str) -> list:
        return ray.get(self.ranker.rank.remote(query))  # blocks the event loop: should be `await`


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    router = Router.remote()
    ranker = Ranker.remote(router)
    ray.get(router.set_ranker.remote(ranker))
    print("READY: driver -> Router.route (ray.get in async def) -> Ranker.rank -> Router.features", flush=True)
    print(ray.get(router.route.remote("why does ray hang")), flush=True)


if __name__ == "__main__":
    main()
