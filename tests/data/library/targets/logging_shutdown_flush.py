"""Reproduction: dictConfig holds the logging module lock across logging.shutdown(), which flushes
a handler; the handler's flush waits for its upload thread to drain a queue, and that thread
logs (urllib3-style `logger.debug`), which needs the module lock. (open-telemetry/
opentelemetry-python#4636, logtail/logtail-python#37.) Prints READY when both are stuck."""

import logging
import logging.config
import os
import queue
import threading
import time


class UploadHandler(logging.Handler):
    """Queues records; a FlushWorker thread uploads them. flush() waits until the queue drained."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: queue.Queue[logging.LogRecord] = queue.Queue()
        threading.Thread(target=self._upload_loop, name="FlushWorker", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        self.pending.put(record)

    def _upload_loop(self) -> None:
        while True:
            record = self.pending.get()
            time.sleep(0.5)  # the HTTP request
            logging.getLogger("uploader.http").debug("sent %s", record.msg)  # needs logging._lock
            self.pending.task_done()

    def flush(self) -> None:
        self.pending.join()


if __name__ == "__main__":
    logging.getLogger().addHandler(UploadHandler())
    logging.getLogger("train").warning("epoch 1 done")
    threading.Timer(1.5, lambda: print("READY", os.getpid(), flush=True)).start()
    logging.config.dictConfig({"version": 1, "root": {"level": "INFO"}})
