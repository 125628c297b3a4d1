"""Evaluator actor that deadlocks inside ``logging``: dictConfig against a handler that creates handlers.

Scenario
    An ``Evaluator`` actor scores checkpoints for a ``Trainer``. A background reporter thread logs
    its progress every 0.05 s to the ``metrics`` logger through a ``RollingMetricsHandler``: on
    each record the handler checks whether the metrics file should roll over (a slow stat of
    shared storage, 0.3 s) and opens a fresh ``logging.FileHandler`` for the new period. Before
    each evaluation the actor re-applies its logging setup (``logging.config.dictConfig`` and a
    fresh metrics handler) - what Ray Data's logging setup did per task before 2.51, and what
    mlflow or pymilvus do at import.

Mechanism
    ``dictConfig`` takes the logging module lock (``logging._lock``) and, in
    ``_clearExistingHandlers`` -> ``logging.shutdown``, takes each existing handler's lock. The
    reporter is inside ``RollingMetricsHandler.emit`` (for 0.3 s of every 0.35 s):
    ``Handler.handle`` holds that handler's lock, and creating the ``FileHandler``
    (``Handler.__init__`` -> ``_addHandlerRef`` -> ``_acquireLock``) needs the module lock. The two
    threads take the two locks in opposite orders, both inside the standard library: the
    evaluation thread waits in ``Handler.acquire`` under ``DictConfigurator.configure``, the reporter
    in ``_acquireLock`` (the same two stacks as ray-project/ray#58377). ``Evaluator.evaluate``
    never returns; ``Trainer.fit`` waits in ``ray.get`` on it, the driver on ``Trainer.fit``.

What misleads
    No job frame is on top of either stuck stack: one thread is in ``Handler.acquire``, the other in
    ``_acquireLock``, both in ``logging``, which looks like Ray's or Python's own machinery idling
    (a rule that took library-only threads for polling hid exactly this, ray-project/ray#58377).
    It is a lock-order deadlock between the module lock and one handler's lock.

Expected diagnosis
    ``logging-lock-deadlock``: the Evaluator's reporter thread waits for the logging module lock in
    ``_acquireLock`` while its main thread holds it inside ``DictConfigurator.configure``
    (``logging/config.py``), waiting at ``Handler.acquire``. Culprit: Evaluator. Trainer.fit waits in
    ray.get on Evaluator.evaluate; the driver on Trainer.fit.
"""

import logging
import logging.config
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "logging-lock-deadlock",
    "culprits": [{"class_name": "Evaluator", "rank": None}],
    "notes": "Evaluator.evaluate calls logging.config.dictConfig (module lock held, then each handler's lock in "
    "logging.shutdown) while the reporter thread is inside RollingMetricsHandler.emit (handler lock held) "
    "creating a FileHandler (_addHandlerRef -> _acquireLock): lock-order deadlock inside logging. "
    "Trainer.fit in ray.get on Evaluator.evaluate; driver on Trainer.fit.",
}

LOGGING_CONFIG = {"version": 1, "disable_existing_loggers": False, "root": {"level": "INFO"}}


@dataclass
class EvalConfig:
    num_checkpoints: int = 6
    report_every_s: float = 0.05
    rollover_check_s: float = 0.3  # stat() of the metrics file on shared storage


class RollingMetricsHandler(logging.Handler):
    """Writes metrics to one file per roll-over period: a fresh FileHandler for each period."""

    def __init__(self, folder: str, rollover_check_s: float):
        super().__init__()
        self.folder = folder
        self.rollover_check_s = rollover_check_s
        self.period = 0
        self.inner = None

    def emit(self, record: logging.LogRecord) -> None:  # Handler.handle holds self.lock here
        time.sleep(self.rollover_check_s)
        self.period += 1
        inner = logging.FileHandler(os.path.join(self.folder, f"metrics-{self.period:04d}.log"))
        inner.emit(record)
        if self.inner is not None:
            self.inner.close()
        self.inner = inner


@ray.remote(num_cpus=0.25)
class Evaluator:
    def __init__(self, cfg: dict):
        self.cfg = EvalConfig(**cfg)
        self.folder = tempfile.mkdtemp(prefix="eval-metrics-")
        self.metrics = logging.getLogger("metrics")
        self.metrics.propagate = False
        self.scored = 0
        self._setup_logging()
        threading.Thread(target=self._report_loop, name="metrics-reporter", daemon=True).start()

    def _report_loop(self) -> None:
        while True:
            self.metrics.info("scored=%d", self.scored)
            time.sleep(self.cfg.report_every_s)

    def _setup_logging(self) -> None:
        logging.config.dictConfig(LOGGING_CONFIG)
        self.metrics.handlers = [RollingMetricsHandler(self.folder, self.cfg.rollover_check_s)]

    def evaluate(self, checkpoint: list) -> float:
        self._setup_logging()  # per-evaluation logging setup
        self.scored += 1
        return sum(x * x for x in checkpoint) / len(checkpoint)


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, evaluator, cfg: dict):
        self.evaluator = evaluator
        self.cfg = EvalConfig(**cfg)
        self.w = [1.0, -2.0, 0.5, 3.0]

    def fit(self) -> list:
        scores = []
        for step in range(self.cfg.num_checkpoints):
            self.w = [0.9 * x for x in self.w]
            scores.append(ray.get(self.evaluator.evaluate.remote(list(self.w))))
            print(f"[trainer] checkpoint {step}: score {scores[-1]:.4f}", flush=True)
        return scores


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = asdict(EvalConfig())
    evaluator = Evaluator.remote(cfg)
    trainer = Trainer.remote(evaluator, cfg)
    print("READY: Trainer.fit -> Evaluator.evaluate (dictConfig against the metrics reporter thread)", flush=True)
    print(f"scores: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
