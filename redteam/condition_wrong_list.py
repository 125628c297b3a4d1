"""A threaded batcher waits on a Condition for items that its producer appends to another list.

Mechanism: BatchAssembler (max_concurrency=4) hands out fixed-size batches: get_batch() waits with
`Condition.wait_for(lambda: len(self.ready) >= 8)`; add() takes the condition, appends to
`self.staged` (a rename left half done: nothing moves items from `staged` to `ready`) and
notifies. The driver adds 20 items (every add returns), then asks for a batch: get_batch wakes on
each notify, re-checks its predicate and sleeps again, forever. No thread holds the condition's
lock; no call that could grow `ready` exists or is queued.
Truth: culprit BatchAssembler.get_batch (its condition can never become true: add() fills
`staged`, not `ready`); the driver is its victim. Fix: append to the list the predicate reads
(or move staged items to ready), and give wait_for a timeout.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class BatchAssembler:
    def __init__(self, batch_size: int = 8):
        self.batch_size = batch_size
        self.cond = threading.Condition()
        self.ready: list[int] = []
        self.staged: list[int] = []

    def add(self, item: int) -> int:
        with self.cond:
            self.staged.append(item)
            self.cond.notify_all()
            return len(self.staged)

    def get_batch(self) -> list[int]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.ready) >= self.batch_size)
            batch, self.ready = self.ready[: self.batch_size], self.ready[self.batch_size:]
            return batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    assembler = BatchAssembler.remote()
    print("added", ray.get([assembler.add.remote(i) for i in range(20)])[-1], flush=True)
    batch = assembler.get_batch.remote()
    print("READY", flush=True)
    print(ray.get(batch))


if __name__ == "__main__":
    main()
