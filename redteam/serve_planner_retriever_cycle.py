"""Two Serve deployments call each other through handles: the callee's sub-request waits for the caller's only slot.

Scenario: a RAG stack. Planner (1 replica, max_ongoing_requests=1) handles a question by asking the
Retriever deployment for documents (`await self.retriever.search.remote(q)`). Retriever, for
"query expansion", asks the Planner back for synonyms (`await self.planner.expand.remote(q)`) before
searching. The Planner's only request slot holds the outer request, which awaits the Retriever; the
Retriever's `expand` sub-request waits in its handle's router for a Planner slot that never frees.
A client actor waits in `.result()`. Both replicas' event loops are idle; nothing is logged.

Mechanism: a request cycle between two deployments (A -> B -> A) with A's max_ongoing_requests
exhausted by the request that started the cycle.
Truth: hang; culprit the Retriever's callback `await self.planner.expand.remote(q)` closing the cycle
with Planner.__call__'s `await self.retriever.search.remote(q)` (Planner max_ongoing_requests=1).
Fix: do query expansion inside the Retriever (or a third deployment), or raise Planner's
max_ongoing_requests. The client is a victim.
"""
# redteam-ray-start: --resources='{"rt14_rag":1}'
import os
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, max_ongoing_requests=1, ray_actor_options={"num_cpus": 0.1})
class Planner:
    def __init__(self, retriever):
        self.retriever = retriever

    async def expand(self, q: str) -> list[str]:
        return [q, q.lower(), q.replace(" ", "-")]

    async def __call__(self, q: str) -> str:
        docs = await self.retriever.search.remote(q)
        return f"answer from {len(docs)} docs"


@serve.deployment(num_replicas=1, max_ongoing_requests=4, ray_actor_options={"num_cpus": 0.1})
class Retriever:
    def __init__(self):
        self.planner = None

    async def search(self, q: str) -> list[str]:
        if self.planner is None:
            self.planner = serve.get_deployment_handle("Planner", app_name="rag")
        terms = await self.planner.expand.remote(q)
        return [f"doc:{t}" for t in terms]


@ray.remote(num_cpus=0.1)
class QAClient:
    def __init__(self):
        self.h = serve.get_deployment_handle("Planner", app_name="rag")

    def ask(self, q: str) -> str:
        return self.h.remote(q).result()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve.run(Planner.bind(Retriever.bind()), name="rag", route_prefix=None)
    client = QAClient.remote()
    ref = client.ask.remote("What Is Ray Serve")
    time.sleep(3)
    print("READY answering questions", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
