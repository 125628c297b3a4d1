"""Shard reader streamed with back-pressure: the driver peeks at the stream, then waits for its end.

Scenario
    A preprocessing job streams decoded shards out of a ``read_shards`` generator task
    (``num_returns="streaming"``, ``_generator_backpressure_num_objects=2`` so that at most two
    decoded shards sit in the object store). After its last shard the reader tells a
    ``Tracker`` actor it has finished (``mark_finished``: the manifest is complete). The driver
    takes the first shard to check its schema, then waits on ``Tracker.wait_finished`` ("make
    sure the manifest is complete before training on it") and only then iterates the rest.

Mechanism
    With two unread shards in flight the generator is paused by back-pressure between two
    yields: its Python frame is suspended (no thread shows it) while the State API says
    ``read_shards`` is RUNNING. It resumes only when the driver reads another item; the driver
    waits in ``ray.get`` on ``Tracker.wait_finished``, a ``threading.Event`` that only the
    reader's ``mark_finished`` call, after its loop, would set. Driver -> Tracker -> reader ->
    driver: nothing moves, nothing fails, nothing times out.

What misleads
    ``Tracker.wait_finished`` waits on an Event that nothing in its own process will set and
    the reader process looks idle (its main thread in Ray's task loop): it reads as "the
    tracker's setter is gone" and "the reader is idle". Wrong: the reader is a RUNNING call
    paused mid-stream, the only work of the job that can still call ``mark_finished``, and it
    waits for the driver to read.

Expected diagnosis
    ``generator-backpressure``: a cycle driver -> Tracker.wait_finished (event-wait) ->
    read_shards (a RUNNING call no thread shows: a streaming generator paused by back-pressure)
    -> the driver, its consumer, which waits in ``ray.get`` instead of reading. Culprit: the
    driver (read the whole stream before waiting on what the generator does at its end).
"""

import os
import threading

import numpy as np
import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "generator-backpressure",
    # the cycle's members: the driver (named first: it stopped reading), Tracker and read_shards
    "culprits": [{"class_name": "Tracker", "rank": None}],
    "notes": "read_shards (streaming, back-pressure 2) is paused after two unread shards; the driver "
    "peeked at one and waits in ray.get on Tracker.wait_finished, whose Event only read_shards sets "
    "after its loop: driver -> Tracker -> read_shards -> driver.",
}


@ray.remote(num_cpus=0.1, max_concurrency=2)
class Tracker:
    def __init__(self):
        self.finished = threading.Event()
        self.shards = 0

    def mark_finished(self, shards: int) -> None:
        self.shards = shards
        self.finished.set()

    def wait_finished(self) -> int:
        self.finished.wait()
        return self.shards


@ray.remote(num_cpus=0.5, num_returns="streaming", _generator_backpressure_num_objects=2)
def read_shards(num_shards: int, rows: int, tracker):
    for shard in range(num_shards):
        rng = np.random.default_rng(shard)
        yield rng.standard_normal((rows, 8)).astype(np.float32)  # a decoded shard
    ray.get(tracker.mark_finished.remote(num_shards))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    tracker = Tracker.remote()
    stream = read_shards.remote(10, 1024, tracker)
    first = ray.get(next(stream))
    print(f"schema ok: {first.dtype} {first.shape}", flush=True)
    print("READY: driver waits on Tracker.wait_finished before reading the rest of the stream", flush=True)
    total = ray.get(tracker.wait_finished.remote())
    rows = first.shape[0] + sum(ray.get(ref).shape[0] for ref in stream)
    print(f"{total} shards, {rows} rows", flush=True)


if __name__ == "__main__":
    main()
