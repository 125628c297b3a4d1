"""A trainer stops its logging QueueListener while holding the lock the listener's handler needs.

Scenario: Trainer routes its log records through `logging.handlers.QueueHandler` → a
`QueueListener` thread (stdlib, "logging off the hot path"). The listener's handler is a
MetricsFileHandler whose emit() updates a shared run-state dict under `self.state_lock` (a
threading.Lock, the same lock the trainer uses to guard its run state). At the end of fit(),
`close_run()` takes `self.state_lock` ("no record may interleave with the final state"), logs
"run closed" and calls `listener.stop()`. stop() enqueues the sentinel and joins the listener
thread — but the listener is inside emit() of the "run closed" record, waiting for state_lock,
which close_run holds while it joins. The main thread waits in Thread.join (in QueueListener.stop),
the listener thread (`Thread-N (_monitor)`) in Lock.acquire in emit. The driver waits in ray.get.

Mechanism: a join of a library's internal thread (logging's QueueListener._monitor) by a thread
holding a lock that the joined thread's callback (the handler's emit) takes: join/lock cycle
inside one process, through a stdlib thread the user never started by hand.
Truth: culprit Trainer.close_run (joins the listener — listener.stop() — while holding state_lock,
which the listener's handler takes); fix: call listener.stop() after releasing the lock (or do not
take the state lock inside a handler).
"""
import logging
import logging.handlers
import os
import queue
import threading
import time

import ray


class MetricsFileHandler(logging.Handler):
    def __init__(self, path, state, lock):
        super().__init__()
        self.path, self.state, self.state_lock = path, state, lock

    def emit(self, record):
        with self.state_lock:
            self.state["records"] = self.state.get("records", 0) + 1
            with open(self.path, "a") as fh:
                fh.write(self.format(record) + "\n")


@ray.remote(num_cpus=1)
class Trainer:
    def __init__(self):
        self.state_lock = threading.Lock()
        self.state = {"step": 0}
        self.q = queue.Queue()
        self.log = logging.getLogger("trainer.run")
        self.log.setLevel(logging.INFO)
        self.log.propagate = False
        self.log.addHandler(logging.handlers.QueueHandler(self.q))
        self.listener = logging.handlers.QueueListener(
            self.q, MetricsFileHandler("/tmp/redteam9_trainer_metrics.log", self.state, self.state_lock))
        self.listener.start()

    def close_run(self):
        with self.state_lock:
            self.state["closed"] = True
            self.log.info("run closed at step %d", self.state["step"])
            time.sleep(0.2)   # the record reaches the listener, which now waits for state_lock
            self.listener.stop()
        return self.state

    def fit(self, steps):
        for i in range(steps):
            with self.state_lock:
                self.state["step"] = i
            self.log.info("step %d", i)
        print("fit done; closing run", flush=True)
        return self.close_run()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    t = Trainer.remote()
    ref = t.fit.remote(50)
    print("READY: driver -> Trainer.fit -> close_run (listener.stop() joins under state_lock)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
