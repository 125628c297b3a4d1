"""A program that hangs on the logging module lock: the `FlushWorker` thread takes logging's
module lock (as logging.config and handler set-up do) and then waits for the main thread, which
is constructing a FileHandler: `Handler.__init__` needs the module lock. interrupted.py records it."""

import logging
import os
import tempfile
import threading

ready = threading.Event()
flushed = threading.Event()


def flush_worker() -> None:
    logging._acquireLock()  # type: ignore[attr-defined]  # what logging.config.dictConfig holds
    try:
        ready.set()
        flushed.wait()  # waits for the main thread, which waits for this lock
    finally:
        logging._releaseLock()  # type: ignore[attr-defined]


def main() -> None:
    threading.Thread(target=flush_worker, name="Thread-1 (flush_worker)", daemon=True).start()
    ready.wait()
    print("ready", flush=True)
    handler = logging.FileHandler(os.path.join(tempfile.gettempdir(), "hung_logging.log"))
    logging.getLogger("train").addHandler(handler)
    flushed.set()


if __name__ == "__main__":
    main()
