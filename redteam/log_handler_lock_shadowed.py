"""A logging handler stores the run's lock as `self.lock`, shadowing logging.Handler.lock: the listener re-takes it.

Scenario: Trainer routes its log records through `logging.handlers.QueueHandler` → a
`QueueListener` thread (stdlib, "logging off the hot path"). The listener's handler is a
MetricsFileHandler that counts records in the trainer's run-state dict, so it is given the
trainer's `state_lock` (a threading.Lock) and keeps it as `self.lock` — the attribute that
logging.Handler itself uses: Handler.__init__ made an RLock there and Handler.handle() does
`with self.lock: self.emit(record)`. Now handle() takes state_lock, and emit()'s own
`with self.lock:` takes the same non-reentrant lock again: the listener thread
(`Thread-1 (_monitor)`) stops on the first record, holding state_lock. fit() goes on (QueueHandler
only enqueues) and prints "fit done; closing run"; close_run() then waits at `with
self.state_lock:` for the lock the listener holds. The driver waits in ray.get.
(Written as "listener.stop() under the lock"; the attribute name made it this instead — see
log_listener_stop_under_lock.py for that one.)

Mechanism: a self-deadlock on a non-reentrant Lock inside a library's internal thread: the library
frame (logging's Handler.handle, line `self.emit(record)` inside `with self.lock:`) holds it, the
user's emit() re-takes it; MainThread is a waiter on that lock, holding nothing.
Truth: culprit MetricsFileHandler (its `self.lock = lock` replaced Handler.lock; emit re-acquires
the lock Handler.handle holds), in Trainer's listener thread; MainThread (close_run) and the driver
are victims. Fix: do not name the attribute `lock` (or do not lock again in emit — handle() already
serialises emit under the handler's own lock).
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
        self.path, self.state, self.lock = path, state, lock

    def emit(self, record):
        with self.lock:
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
