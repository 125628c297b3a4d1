"""A streaming generator task blocked by back-pressure: its consumer stopped reading it.

Mechanism: read_shards is a generator task (num_returns="streaming",
_generator_backpressure_num_objects=2) that yields shards, then tells a Tracker actor it finished.
The driver peeks at the first shard (to check the schema) and then waits on
Tracker.wait_finished before iterating the rest. With two unconsumed shards in flight the generator
is paused inside its yield (Ray's back-pressure wait in the worker); it never reaches mark_finished,
so Tracker.wait_finished (threading.Event) never returns. Cycle: driver -> Tracker.wait_finished ->
(set by) read_shards -> (paused until) the driver consumes.
Truth: culprit the driver (waits for the generator to finish before consuming it); fix: consume the
generator first (or wait on the generator itself), or drop the back-pressure limit.
"""
import os
import threading

import numpy as np
import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class Tracker:
    def __init__(self):
        self.done = threading.Event()

    def mark_finished(self):
        self.done.set()

    def wait_finished(self):
        self.done.wait()
        return True


@ray.remote(num_cpus=0.5, num_returns="streaming", _generator_backpressure_num_objects=2)
def read_shards(n, tracker):
    for i in range(n):
        yield np.full(1000, i)
    ray.get(tracker.mark_finished.remote())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tracker = Tracker.remote()
    gen = read_shards.remote(10, tracker)
    first = ray.get(next(gen))
    print("schema ok:", first.dtype, flush=True)
    print("READY: driver waits Tracker.wait_finished before consuming the streaming generator", flush=True)
    ray.get(tracker.wait_finished.remote())
    print(sum(ray.get(r).sum() for r in gen))


if __name__ == "__main__":
    main()
