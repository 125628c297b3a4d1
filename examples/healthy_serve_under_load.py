"""A healthy Ray Serve app under load: rollout actors keep an async deployment busy; nothing is hung.

Scenario
    Four ``Client`` actors call an async ``Embedder`` deployment through a ``DeploymentHandle``
    as fast as they can (``handle.embed.remote(text).result()`` in a loop). Each request awaits
    a simulated model call (``await asyncio.sleep(0.05)``) under an ``asyncio.Semaphore`` of 2
    (the model's batch slots), so requests queue inside the replica.

Mechanism
    Nothing is stuck: the replica finishes about forty requests a second, every one logged in
    its request log under the session's ``logs/serve/``.

What misleads
    Every sample shows the callers waiting in ``DeploymentResponse.result`` and the replica's
    event loop idle: its request coroutines are suspended in ``await``, invisible to py-spy, and
    its in-flight gauge is never zero. A stack-only reading sees callers waiting on a replica
    that does nothing.

Expected diagnosis
    ``no-hang``: the replica's request log gains finished requests during the window.
"""

import asyncio
import os

import ray
from ray import serve

EXPECTED = {
    "verdict": "no-hang",
    "pattern": None,
    "culprits": [],
    "ready_timeout_s": 300,
    "notes": "an async deployment under constant load; its request log shows requests finishing.",
}


@serve.deployment(num_replicas=1, max_ongoing_requests=32, ray_actor_options={"num_cpus": 0.1})
class Embedder:
    def __init__(self):
        self.slots = asyncio.Semaphore(2)

    async def embed(self, text: str) -> int:
        async with self.slots:
            await asyncio.sleep(0.05)  # the model call
        return len(text)


@ray.remote(num_cpus=0.1)
class Client:
    def __init__(self, handle):
        self.embedder = handle

    def warm(self) -> int:
        return self.embedder.embed.remote("warm-up").result()

    def run(self) -> int:
        done = 0
        while True:
            done += self.embedder.embed.remote(f"text-{done}").result()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")  # no HTTP proxy: handles only (a proxy would bind every interface)
    handle = serve.run(Embedder.bind(), name="embedder", route_prefix=None)
    clients = [Client.remote(handle) for _ in range(4)]
    ray.get([c.warm.remote() for c in clients])
    refs = [c.run.remote() for c in clients]
    print("READY: clients calling the Embedder deployment", flush=True)
    ray.get(refs)


if __name__ == "__main__":
    main()
