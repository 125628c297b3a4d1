"""An actor waits in queue.Queue.join() for task_done() calls from a consumer thread that died.

Mechanism: Indexer.index_all puts documents on a queue.Queue consumed by one background thread
that calls task_done() per item, then waits in q.join() until all are done. Item 7 makes the
consumer raise (KeyError, uncaught: the thread ends, its traceback only in the worker's stderr), so
unfinished_tasks never reaches 0: q.join() waits forever in Condition.wait (all_tasks_done); no
live thread can call task_done. Driver in ray.get.
Truth: culprit the Indexer's consumer thread that died (and index_all joining without a liveness
check); fix: try/finally task_done() in the consumer, or wait with a timeout + thread.is_alive().
"""
import os
import queue
import threading

import ray


@ray.remote(num_cpus=0.1)
class Indexer:
    def __init__(self):
        self.q = queue.Queue()
        self.index = {}
        threading.Thread(target=self._consume, name="index-consumer", daemon=True).start()

    def _consume(self):
        while True:
            doc = self.q.get()
            self.index[doc["id"]] = len(doc["text"])
            self.q.task_done()

    def index_all(self, n):
        for i in range(n):
            self.q.put({"id": i, "text": "x" * i} if i != 7 else {"text": "no id"})
        self.q.join()
        return len(self.index)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ix = Indexer.remote()
    print("READY: driver -> Indexer.index_all (consumer thread dies on item 7, q.join())", flush=True)
    print(ray.get(ix.index_all.remote(12)))


if __name__ == "__main__":
    main()
