"""Learner that calls one of its own methods through its own actor handle.

Scenario
    Metrics used to be reported to a separate ``MetricsLogger`` actor. A refactor merged the
    logger into the ``Learner`` actor but kept the call site: ``self.metrics_sink`` is now the
    Learner's own handle (``ray.get_runtime_context().current_actor``), and ``train`` reports
    every ``log_every`` steps with ``ray.get(self.metrics_sink.report.remote(...))``.

Mechanism
    The Learner has the default ``max_concurrency=1``. ``report`` is queued behind the running
    ``train`` call on the same actor, and ``train`` waits for ``report``: a one-actor wait-for
    cycle. Steps 0-3 run; the report at step 4 never returns.

What misleads
    The handle it calls looks like another actor's, so the wait reads as "the other actor is
    slow". Wrong: the queued call (``SUBMITTED_TO_WORKER``, no ``worker_pid``) has the same
    ``actor_id`` as the waiting task - a cycle of one that no other process can break.

Expected diagnosis
    ``actor-call-cycle`` (self-call): Learner.train is RUNNING and blocked in ``ray.get``;
    the awaited ``Learner.report`` is queued on the same actor (SUBMITTED_TO_WORKER, no worker
    pid). Culprit: Learner. The driver, waiting on ``Learner.train``, is a victim.
"""

import os
import random
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "actor-call-cycle",
    "culprits": [{"class_name": "Learner", "rank": None}],
    "notes": "Learner.train calls ray.get(self_handle.report.remote()) on its own handle "
    "(max_concurrency=1) at step 4 (log_every=4); report is queued behind train forever.",
}


@dataclass
class LearnerConfig:
    num_steps: int = 20
    log_every: int = 4
    dim: int = 16
    lr: float = 0.1
    seed: int = 2


@ray.remote(num_cpus=0.1)
class Learner:
    def __init__(self, cfg: dict):
        self.cfg = LearnerConfig(**cfg)
        self.rng = random.Random(self.cfg.seed)
        self.w = [0.0] * self.cfg.dim
        self.history = []
        # Was: MetricsLogger.remote(); the logger now lives in this actor.
        self.metrics_sink = ray.get_runtime_context().current_actor

    def report(self, step: int, loss: float) -> int:
        self.history.append((step, loss))
        print(f"[metrics] step {step}: loss {loss:.4f}", flush=True)
        return len(self.history)

    def train(self) -> dict:
        loss = float("nan")
        for step in range(self.cfg.num_steps):
            x = [self.rng.gauss(0, 1) for _ in range(self.cfg.dim)]
            y = sum(x)
            err = sum(w * xi for w, xi in zip(self.w, x)) - y
            self.w = [w - self.cfg.lr * err * xi / self.cfg.dim for w, xi in zip(self.w, x)]
            loss = err * err
            print(f"[learner] step {step} done", flush=True)
            if step > 0 and step % self.cfg.log_every == 0:
                ray.get(self.metrics_sink.report.remote(step, loss))
        return {"final_loss": loss}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = LearnerConfig()
    learner = Learner.remote(asdict(cfg))
    print(f"READY: Learner.train -> Learner.report via own handle at step {cfg.log_every}",
          flush=True)
    print(ray.get(learner.train.remote()), flush=True)


if __name__ == "__main__":
    main()
