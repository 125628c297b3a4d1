"""Serve: a composed deployment's constructor waits for a config that only the front deployment's first request sends.

Scenario: a two-stage ranking app `Frontend -> Reranker`. The driver creates a `ray.util.queue.Queue`
("config channel") and passes it to both. Reranker's `__init__` takes its model config with
`self.cfg = cfg_q.get(block=True)`. Frontend sends the config lazily: its `__call__` does
`self.cfg_q.put(...)` on the first request, then awaits the reranker. The driver calls
`serve.run(Frontend.bind(Reranker.bind(q), q))` and only then sends requests.

Mechanism: serve.run waits until every replica of the app is running; the Reranker replica stays in
`__init__` waiting on the queue; the queue's only producer is Frontend.__call__, which no request can
reach before serve.run returns: the driver waits in serve.run, the replica in its constructor.
Truth: hang. Culprit: Reranker.__init__, line `self.cfg = cfg_q.get(block=True)` (its config
comes only from a request path); the producer that never runs is Frontend.__call__'s `put`. Fix: pass
the config to Reranker.bind(...) (or put it on the queue before serve.run).
"""
# redteam-ray-start: --resources='{"rt15c_rr":1}'
import os

import ray
from ray import serve
from ray.util.queue import Queue


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Reranker:
    def __init__(self, cfg_q):
        self.cfg = cfg_q.get(block=True)

    async def rerank(self, items):
        return sorted(items, reverse=self.cfg.get("descending", True))


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Frontend:
    def __init__(self, reranker, cfg_q):
        self.reranker = reranker
        self.cfg_q = cfg_q
        self.sent = False

    async def __call__(self, items):
        if not self.sent:
            self.cfg_q.put({"descending": True, "top_k": 10})
            self.sent = True
        return await self.reranker.rerank.remote(items)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    q = Queue()
    print("READY deploying ranking app", flush=True)
    handle = serve.run(Frontend.bind(Reranker.bind(q), q), name="ranking", route_prefix=None)
    print(handle.remote([3, 1, 2]).result())


if __name__ == "__main__":
    main()
