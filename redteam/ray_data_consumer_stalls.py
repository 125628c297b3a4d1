"""A Ray Data pipeline whose consumer (the driver) stops pulling: it waits on an actor instead.

Mechanism: the driver iterates ds.iter_batches(); after batch 2 it calls ray.get on
Evaluator.score(), which waits on a threading.Event set only by Evaluator.ready() -- never called.
Ray Data's operators are idle because the consumer does not pull (backpressure). Truth: culprit
Evaluator (Event never set); the Ray Data streaming executor is a bystander.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1, max_concurrency=2)
class Evaluator:
    def __init__(self):
        self.ev = threading.Event()
    def ready(self):
        self.ev.set()
    def score(self, n):
        self.ev.wait()
        return n

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ev = Evaluator.remote()
    ds = ray.data.range(10_000, override_num_blocks=20).map_batches(lambda b: {"id": b["id"] * 2})
    for i, batch in enumerate(ds.iter_batches(batch_size=100)):
        print(f"batch {i}", flush=True)
        if i == 2:
            print("READY: driver consumer waits on Evaluator.score", flush=True)
            ray.get(ev.score.remote(len(batch["id"])))

if __name__ == "__main__":
    main()
