"""A Serve deployment recurses through its own DeploymentHandle: every request slot awaits a sub-request that cannot get one.

Scenario: a Summarizer deployment (1 replica, max_ongoing_requests=2) summarizes long documents
map-reduce style: a document longer than 400 characters is split in halves and each half is sent
back to the deployment itself through `serve.get_deployment_handle("Summarizer", "summarizer")`,
`await asyncio.gather(...)` on the two DeploymentResponses. Two EvalWorker actors each send one
long document and wait in `.result()`. Both of the replica's 2 slots hold an outer request that
awaits its halves; the halves are queued in the handle's router (the replica is at
max_ongoing_requests) and are never assigned. The replica's loop is idle, nothing is logged after
the two outer requests started.

Mechanism: a Serve replica's every request slot awaits sub-requests to the same deployment
(recursion through its own handle with bounded max_ongoing_requests); the sub-requests wait in the
router for a free slot.
Truth: culprit the Summarizer replica (its __call__ recurses through its own handle). Fix: recurse
in-process (call the summarizing function directly) or bound recursion below max_ongoing_requests.
The EvalWorkers are victims.
"""
# redteam-ray-start: --resources='{"rt7_summ":1}'
import asyncio
import os
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, max_ongoing_requests=2, ray_actor_options={"num_cpus": 0.1})
class Summarizer:
    def __init__(self):
        self._self = None

    async def __call__(self, doc: str) -> str:
        if len(doc) <= 400:
            words = doc.split()
            return " ".join(words[:: max(1, len(words) // 8)])
        if self._self is None:
            self._self = serve.get_deployment_handle("Summarizer", app_name="summarizer")
        half = len(doc) // 2
        parts = await asyncio.gather(self._self.remote(doc[:half]), self._self.remote(doc[half:]))
        return " ".join(parts)


@ray.remote(num_cpus=0.1)
class EvalWorker:
    def __init__(self):
        self.h = serve.get_deployment_handle("Summarizer", app_name="summarizer")

    def ready(self) -> bool:
        return True

    def run(self, doc: str) -> int:
        return len(self.h.remote(doc).result())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    handle = serve.run(Summarizer.bind(), name="summarizer", route_prefix=None)
    print("warm-up:", handle.remote("a short document that needs no split").result(), flush=True)
    doc = " ".join(f"token{i}" for i in range(300))
    workers = [EvalWorker.remote() for _ in range(2)]
    ray.get([w.ready.remote() for w in workers])
    refs = [w.run.remote(doc) for w in workers]
    time.sleep(3)
    print("READY summarizing eval set", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
