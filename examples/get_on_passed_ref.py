"""An actor waits in ray.get on an ObjectRef handed to it; only the task that creates that object is stuck.

Scenario
    A driver starts three ``load_shard`` tasks and a long-running ``heartbeat`` task (a healthy
    monitor that logs every few seconds). It hands shard 1's ObjectRef (inside a list, so Ray
    does not resolve it first) to a ``Merger`` actor, whose ``merge`` calls ``ray.get`` on it, and
    waits for the merge.

Mechanism
    ``load_shard(1)`` polls for a marker file that never appears (a sleep loop). ``Merger.merge``
    waits on that one object; the driver waits on ``merge``. The Merger did not submit the task
    it waits for: the only link from its ``ray.get`` to ``load_shard(1)`` is the object itself,
    whose id holds the id of the task that creates it.

What misleads
    The Merger's own calls are all finished or running; its caller (the driver) has two
    unfinished tasks besides ``merge``: ``load_shard(1)`` and ``heartbeat``. Guessing from the
    caller's tasks names both, and ``heartbeat`` sleeps in a loop too. Only the object id tells
    which one the Merger waits for.

Expected diagnosis
    ``poll-never-satisfied`` in the ``load_shard`` task: Merger waits in ray.get for the object
    load_shard(1) creates (read from the ObjectRef's id); the heartbeat task is not on the chain.
    Fix: give the poll a deadline that raises with what it waited for.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "poll-never-satisfied",
    "culprits": [{"class_name": "load_shard", "rank": None}],
    "notes": "Merger.merge ray.get's an ObjectRef passed in by the driver; the object is created by "
    "load_shard(1), which polls forever for a marker file; the driver's heartbeat task also sleeps in "
    "a loop but nobody waits for it.",
}


@ray.remote(num_cpus=0.25)
def load_shard(index: int) -> list:
    marker = f"/tmp/shard-{index}-{os.getpid()}.ready"
    while index == 1 and not os.path.exists(marker):
        time.sleep(0.5)
    return [index] * 4


@ray.remote(num_cpus=0.25)
def heartbeat(beats: int) -> int:
    for beat in range(beats):
        time.sleep(3.0)
        print(f"heartbeat {beat}", flush=True)
    return beats


@ray.remote(num_cpus=0.25)
class Merger:
    def merge(self, refs: list) -> int:
        rows = ray.get(refs[0])
        return len(rows)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    shards = [load_shard.remote(i) for i in range(3)]
    monitor = heartbeat.remote(10_000)
    ray.get([shards[0], shards[2]])
    merger = Merger.remote()
    ray.get(merger.__ray_ready__.remote())
    merged = merger.merge.remote([shards[1]])
    print("READY: merging shard 1", flush=True)
    print(ray.get(merged), ray.get(monitor), flush=True)


if __name__ == "__main__":
    main()
