"""ActorPool: the call that would release the others is still queued inside the driver's pool.

Scenario: a rescoring job. Two Rescorer actors in a `ray.util.ActorPool` share a
`ray.util.queue.Queue`. Data shards need the calibration scale: `score` takes it with
`self.q.get(block=True)` (and puts it back for the next shard); the calibration shard computes it and
puts it. The listing puts the calibration shard last. The driver submits all three shards, then
drains with `while pool.has_next(): pool.get_next()`.

Mechanism: ActorPool dispatches a call only to an idle actor; the third submit (calibration) has no
idle actor, so it sits in the pool's `_pending_submits` list in the driver's memory and is sent only
when an earlier call returns. Both actors are in `q.get()` waiting for the scale that only the
unsent call produces; the driver waits in `get_next()` on shard 0. Nothing in any process's stack
shows the third call: it exists only in the driver's ActorPool.
Truth: hang. Culprit: the driver (its pool holds the producing call undispatched), line
`results.append(pool.get_next())` (with the submit order above it). Fix: compute the calibration
before submitting the shards (or submit it first / give the pool more actors than dependent
calls); no pool call may wait on another call of the same pool.
"""
import os

import ray
from ray.util import ActorPool
from ray.util.queue import Queue


@ray.remote(num_cpus=0.1)
class Rescorer:
    def __init__(self, q):
        self.q = q

    def score(self, shard):
        if shard["kind"] == "calibration":
            scale = sum(shard["values"]) / len(shard["values"])
            self.q.put(scale)
            return ("calibration", scale)
        scale = self.q.get(block=True)
        self.q.put(scale)
        return (shard["name"], [v * scale for v in shard["values"]])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    q = Queue()
    actors = [Rescorer.remote(q) for _ in range(2)]
    ray.get([a.__ray_ready__.remote() for a in actors])
    pool = ActorPool(actors)
    shards = [
        {"kind": "data", "name": "part-0", "values": [1.0, 2.0, 3.0]},
        {"kind": "data", "name": "part-1", "values": [4.0, 5.0]},
        {"kind": "calibration", "name": "calib", "values": [0.9, 1.1]},
    ]
    for s in shards:
        pool.submit(lambda a, v: a.score.remote(v), s)
    print("READY submitted", len(shards), "shards", flush=True)
    results = []
    while pool.has_next():
        results.append(pool.get_next())
    print(results)


if __name__ == "__main__":
    main()
