"""A worker thread keeps a reference to the actor's queue.Queue; reset() replaces self.q, so submits go elsewhere.

Scenario: Featurizer (threaded, max_concurrency=2) runs a worker thread started in __init__:
`q = self.q; while True: item = q.get(); ...` (a local alias "to avoid the attribute lookup").
Between epochs the driver calls reset(), which drops stale items with `self.q = queue.Queue()`.
submit() puts the next epoch's items into the new `self.q`; the worker thread waits on the old one,
which nobody can reach any more. collect() waits on `self.done` (an Event the worker sets after the
epoch's last item).
Mechanism: the worker thread is in `Queue.get` (no timeout) on the old Queue object (its local `q`);
the new Queue (`self.q`) holds the items; collect's thread is in `Event.wait` on `self.done`, whose
only setter is the worker thread. Driver in ray.get(collect).
Truth: culprit Featurizer.reset (replaces the queue the worker thread holds); fix: drain the queue
in place (`while True: q.get_nowait()` until Empty) or have the worker read `self.q` each time.
"""
import os
import queue
import threading

import ray


@ray.remote(num_cpus=0.5, max_concurrency=2)
class Featurizer:
    def __init__(self):
        self.q = queue.Queue()
        self.done = threading.Event()
        self.out = []
        self.expected = 0
        threading.Thread(target=self._work, name="featurize-worker", daemon=True).start()

    def _work(self):
        q = self.q
        while True:
            item = q.get()
            self.out.append(item * 2)
            if len(self.out) >= self.expected:
                self.done.set()

    def submit(self, items):
        self.done.clear()
        self.out = []
        self.expected = len(items)
        for it in items:
            self.q.put(it)
        return len(items)

    def reset(self):
        self.q = queue.Queue()
        return True

    def collect(self):
        self.done.wait()
        return sum(self.out)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    f = Featurizer.remote()
    ray.get(f.submit.remote(list(range(10))))
    print("epoch 0:", ray.get(f.collect.remote()), flush=True)
    ray.get(f.reset.remote())
    ray.get(f.submit.remote(list(range(10, 20))))
    print("READY: driver -> Featurizer.collect (worker thread waits on the replaced queue)", flush=True)
    print("epoch 1:", ray.get(f.collect.remote()))


if __name__ == "__main__":
    main()
