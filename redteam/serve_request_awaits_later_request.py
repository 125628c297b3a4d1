"""A Serve upload session: the "begin" request awaits a "commit" request that the router holds back.

Scenario: a Serve deployment UploadSession with max_ongoing_requests=1 (one upload at a time per
replica, "to bound memory"). The client sends `begin(upload_id)` — which registers the upload and
awaits an asyncio.Event that `commit(upload_id)` sets — and then sends `commit(upload_id)` and waits
for begin's response. Serve's router never sends commit to the replica: the replica's only slot is
taken by begin, so commit waits in the caller's router queue (the driver's handle), not in the
replica. The replica's loop is idle in select; begin's coroutine is suspended in Event.wait.

Mechanism: a request whose completion depends on a later request to the same replica, with the
replica's concurrency limit (max_ongoing_requests) already used by the first: the later request is
queued outside the replica (in the DeploymentHandle's router), so no task of the replica shows it.
Truth: hang; culprit UploadSession.begin (the replica awaits `self.done[upload_id].wait()` that
only a queued request would set). Fix: raise max_ongoing_requests, or don't make one request wait
for another (return from begin and poll, or commit in the same request).
"""
# redteam-ray-start: --resources='{"serve_upl":1}'
import asyncio
import os
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, max_ongoing_requests=1, ray_actor_options={"num_cpus": 0.1})
class UploadSession:
    def __init__(self):
        self.done: dict[str, asyncio.Event] = {}
        self.parts: dict[str, int] = {}

    async def begin(self, upload_id: str) -> int:
        self.done[upload_id] = asyncio.Event()
        self.parts[upload_id] = 0
        await self.done[upload_id].wait()
        return self.parts[upload_id]

    async def commit(self, upload_id: str, parts: int) -> str:
        self.parts[upload_id] = parts
        self.done.setdefault(upload_id, asyncio.Event()).set()
        return "ok"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    handle = serve.run(UploadSession.bind(), name="uploads", route_prefix=None)
    began = handle.begin.remote("up-7")
    time.sleep(2)
    committed = handle.commit.remote("up-7", 12)
    print("READY: begin awaits commit; commit queued in the handle router (max_ongoing_requests=1)", flush=True)
    print(began.result(), committed.result())


if __name__ == "__main__":
    main()
