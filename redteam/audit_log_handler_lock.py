"""A ledger service logs while holding the lock its own audit log handler takes: it deadlocks itself.

Mechanism: LedgerService installs AuditHandler, a logging.Handler whose emit() appends every
record to the in-memory ledger under `self.ledger_lock` (a threading.Lock). commit() takes the
same lock to apply a batch and, for a batch over the limit, logs a warning before releasing it:
logging calls AuditHandler.emit on the same thread, which waits for `ledger_lock`, held by that
thread further up its own stack. threading.Lock is not reentrant: the thread waits on itself,
nothing else in the process runs job code. Small batches never log inside the lock, so the
first commits succeed. The driver waits in ray.get on commit().
Truth: culprit LedgerService (commit: `log.warning(...)` inside `with self.ledger_lock:`, re-entered
by AuditHandler.emit's `with self.service.ledger_lock:`); fix: log after releasing the lock, or
make ledger_lock an RLock (or have the handler queue records instead of taking the lock).
"""
import logging
import os
import threading
import time

import ray

LIMIT = 50


class AuditHandler(logging.Handler):
    def __init__(self, service):
        super().__init__()
        self.service = service

    def emit(self, record):
        with self.service.ledger_lock:
            self.service.audit.append(self.format(record))


@ray.remote(num_cpus=0.1)
class LedgerService:
    def __init__(self):
        self.ledger_lock = threading.Lock()
        self.entries, self.audit = [], []
        self.log = logging.getLogger("ledger")
        self.log.setLevel(logging.INFO)
        self.log.addHandler(AuditHandler(self))

    def commit(self, batch):
        with self.ledger_lock:
            self.entries.extend(batch)
            if len(batch) > LIMIT:
                self.log.warning("large batch of %d entries committed (limit %d)", len(batch), LIMIT)
        return len(self.entries)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ledger = LedgerService.remote()
    for size in (10, 20, 30):
        print("committed, total", ray.get(ledger.commit.remote([{"amount": i} for i in range(size)])), flush=True)
    big = ledger.commit.remote([{"amount": i} for i in range(80)])
    time.sleep(2)
    print("READY: driver -> LedgerService.commit (80 entries: warning logged under the ledger lock)", flush=True)
    print("committed, total", ray.get(big), flush=True)


if __name__ == "__main__":
    main()
