"""Inference actor that hangs in ``logging.config.dictConfig``: a handler's flush waits for a thread that logs.

Scenario
    A ``Scorer`` actor ships its logs to a log service through an ``UploadHandler``: records are
    queued and a ``log-uploader`` thread sends them (an HTTP client, which logs its own requests at
    DEBUG). ``flush()`` waits until the queue is drained, so that nothing is lost at shutdown. When
    the ``Trainer`` asks it to load a new model version, the actor re-applies its logging
    configuration with ``logging.config.dictConfig`` - what libraries such as mlflow, pymilvus or
    Ray Data's logging setup do on import or per task.

Mechanism
    ``dictConfig`` takes the logging module lock (``logging._lock``) and keeps it across
    ``_clearExistingHandlers`` -> ``logging.shutdown``, which flushes every existing handler. The
    ``UploadHandler``'s flush waits in ``Queue.join`` for the uploader to drain the queue; the
    uploader, sending the pending record, logs through ``logging.getLogger(...)``, which needs the
    module lock (``Manager.getLogger`` -> ``_acquireLock``). The actor's main thread holds the lock
    and waits for the uploader; the uploader waits for the lock. ``Scorer.load`` never returns;
    ``Trainer.fit`` waits in ``ray.get`` on it, the driver on ``Trainer.fit``. Nothing is logged
    about it: logging is what is stuck.

What misleads
    Both stuck threads are inside the standard library (``logging/config.py``, ``queue.py``,
    ``logging/__init__.py``) and the actor logs nothing, so it reads as an idle actor, or a slow
    log service to wait out. Neither: the main thread holds the logging module lock across the
    flush, and the uploader that the flush waits for needs that lock to log one debug line.

Expected diagnosis
    ``logging-lock-deadlock``: the Scorer's ``log-uploader`` thread waits for the logging module lock
    in ``_acquireLock``; its main thread holds it inside ``DictConfigurator.configure``
    (``logging/config.py``) and waits in ``Queue.join`` under ``UploadHandler.flush``. Culprit:
    Scorer. Trainer.fit waits in ray.get on Scorer.load; the driver on Trainer.fit.
"""

import logging
import logging.config
import os
import queue
import threading
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "logging-lock-deadlock",
    "culprits": [{"class_name": "Scorer", "rank": None}],
    "notes": "Scorer.load calls logging.config.dictConfig, which holds logging._lock across logging.shutdown "
    "-> UploadHandler.flush -> Queue.join; the log-uploader thread needs logging._lock (getLogger -> "
    "_acquireLock) to log its request: neither can go on. Trainer.fit in ray.get on Scorer.load; driver on "
    "Trainer.fit.",
}

LOGGING_CONFIG = {"version": 1, "disable_existing_loggers": False, "root": {"level": "INFO"}}


@dataclass
class ScoreConfig:
    num_versions: int = 4
    upload_latency_s: float = 0.2  # one HTTP request to the log service


class UploadHandler(logging.Handler):
    """Queues records; a log-uploader thread sends them. flush() waits until all are sent."""

    def __init__(self, latency_s: float):
        super().__init__()
        self.latency_s = latency_s
        self.pending: queue.Queue = queue.Queue()
        self.sent = 0
        threading.Thread(target=self._upload_loop, name="log-uploader", daemon=True).start()

    def emit(self, record: logging.LogRecord) -> None:
        self.pending.put(self.format(record))

    def _upload_loop(self) -> None:
        while True:
            line = self.pending.get()
            time.sleep(self.latency_s)  # POST the line
            logging.getLogger("logservice.http").debug("POST /logs %d bytes", len(line))
            self.sent += 1
            self.pending.task_done()

    def flush(self) -> None:
        self.pending.join()  # nothing lost at shutdown


@ray.remote(num_cpus=0.25)
class Scorer:
    def __init__(self, cfg: dict):
        self.cfg = ScoreConfig(**cfg)
        self.log = logging.getLogger("scorer")
        self.log.setLevel(logging.INFO)
        self.log.addHandler(UploadHandler(self.cfg.upload_latency_s))
        self.weights = [0.0, 0.0]

    def load(self, version: int, weights: list) -> int:
        self.log.info("loading model version %d", version)
        logging.config.dictConfig(LOGGING_CONFIG)  # per-version logging setup
        self.weights = list(weights)
        return version

    def score(self, x: list) -> float:
        return sum(w * xi for w, xi in zip(self.weights, x))


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, scorer, cfg: dict):
        self.scorer = scorer
        self.cfg = ScoreConfig(**cfg)

    def fit(self) -> list:
        w = [1.0, -1.0]
        for version in range(self.cfg.num_versions):
            w = [0.5 * x + 0.1 for x in w]
            ray.get(self.scorer.load.remote(version, w))
            print(f"[trainer] version {version} loaded", flush=True)
        return w


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = asdict(ScoreConfig())
    scorer = Scorer.remote(cfg)
    trainer = Trainer.remote(scorer, cfg)
    print("READY: Trainer.fit -> Scorer.load (dictConfig flushes the upload handler)", flush=True)
    print(f"weights: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
