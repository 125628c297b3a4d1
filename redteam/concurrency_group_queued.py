"""An actor method waits for an Event set by a method of the same one-slot concurrency group.

Mechanism: Checkpointer declares concurrency_groups {"io": 1, "compute": 2}. save() (group io)
stages the weights and waits on threading.Event `flushed`, set by flush() (group io too). The driver
submits save, then flush, then waits on save: flush is queued behind save in the io group's single
slot, while the compute group has free threads (so "the actor is threaded" misleads).
Truth: culprit Checkpointer.save waiting on flush in its own 1-slot group; fix: put flush in
another group (or size io to 2), or make save not wait for flush.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1, concurrency_groups={"io": 1, "compute": 2})
class Checkpointer:
    def __init__(self):
        self.flushed = threading.Event()
        self.staged = None

    @ray.method(concurrency_group="io")
    def save(self, weights):
        self.staged = weights
        self.flushed.wait()
        return len(self.staged)

    @ray.method(concurrency_group="io")
    def flush(self):
        self.flushed.set()

    @ray.method(concurrency_group="compute")
    def norm(self):
        return 0.0


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ck = Checkpointer.remote()
    ray.get(ck.norm.remote())
    saved = ck.save.remote([1.0] * 100)
    ck.flush.remote()
    print("READY: driver -> Checkpointer.save (io group, 1 slot) waits for flush queued behind it", flush=True)
    print(ray.get(saved))


if __name__ == "__main__":
    main()
