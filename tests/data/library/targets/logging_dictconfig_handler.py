"""Reproduction: dictConfig takes the logging module lock, then a handler's lock; a handler's
emit holds its own lock and creates a new handler, which takes the module lock. Lock-order
deadlock between logging._lock and Handler.lock (python/cpython#96727; the Ray Data form is
ray-project/ray#58377). Prints READY when both threads are stuck."""

import logging
import logging.config
import os
import sys
import threading
import time

in_emit = threading.Event()


class RollingHandler(logging.Handler):
    """Opens a fresh inner handler on the first record after a (slow) rotation check."""

    def emit(self, record: logging.LogRecord) -> None:  # Handler.handle holds self.lock here
        in_emit.set()
        time.sleep(0.5)  # the rotation check: stat() of a network file system
        inner = logging.StreamHandler(open(os.devnull, "w"))  # Handler.__init__ -> _addHandlerRef
        inner.emit(record)


def metrics_loop() -> None:
    log = logging.getLogger("metrics")
    log.addHandler(RollingHandler())
    log.warning("step done")


def reconfigure() -> None:
    in_emit.wait()
    logging.config.dictConfig({"version": 1, "root": {"level": "INFO"}})


if __name__ == "__main__":
    threading.Thread(target=metrics_loop, name="metrics").start()
    threading.Timer(1.5, lambda: print("READY", os.getpid(), flush=True)).start()
    reconfigure()
    sys.exit(0)
