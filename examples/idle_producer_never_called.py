"""Resumed RL training whose samplers are never started: the learner waits on an empty queue.

Scenario
    An IMPALA-style setup: two ``SampleProducer`` actors run environment rollouts in the
    background (``run()``) and put sample batches into a shared ``ray.util.queue.Queue``; the
    ``Learner`` actor takes batches from that queue (``queue.get()``) and updates its policy.
    A fresh run first does a short synchronous warm-up and then starts the samplers; a resumed
    run (``resume_from`` set) restores the learner from a checkpoint and skips the warm-up.

Mechanism
    The ``sampler.run.remote(...)`` calls were written inside the ``if not cfg.resume_from:``
    warm-up block. This run resumes from a checkpoint, so the warm-up is skipped — and with it
    the start of the samplers. Both SampleProducer actors are created and stay ALIVE and idle:
    they never receive a call. ``Learner.fit`` blocks in ``Queue.get()`` (no timeout) forever;
    the queue actor's ``get`` is RUNNING (awaiting), the driver waits in ``ray.get`` on
    ``Learner.fit``. Nothing fails, nothing is pending.

What misleads
    The Learner waits in ``Queue.get``, so the producers look slow, or dead - yet both are ALIVE
    with no error. Wrong: they are idle and have never run a method (only their creation task):
    the ``run()`` call was written inside a warm-up branch that resumed runs skip.

Expected diagnosis
    ``idle-no-work``: the Learner waits in ``Queue.get`` (ray/util/queue.py); no producer of the
    job is dead or failed, and the SampleProducer actors are idle and have never run a method
    (their only task is the creation task): the producing call was never made. Culprit:
    SampleProducer. The driver waits on Learner.fit.
"""

import os
import random
from dataclasses import asdict, dataclass

import ray
from ray.util.queue import Queue

EXPECTED = {
    "verdict": "hang",
    "pattern": "idle-no-work",
    "culprits": [{"class_name": "SampleProducer", "rank": None}],
    "notes": "resume_from is set, so the warm-up block is skipped, and the sampler.run.remote() "
    "calls inside it never happen; both SampleProducers stay idle having run no method; "
    "Learner.fit blocks in ray.util.queue Queue.get() with no timeout; driver on Learner.fit.",
}


@dataclass
class ImpalaConfig:
    num_samplers: int = 2
    rollout_len: int = 32
    batches_per_sampler: int = 50
    warmup_batches: int = 2
    num_updates: int = 100
    lr: float = 0.01
    resume_from: str = "/mnt/ckpt/impala/run-17/checkpoint_000400"
    seed: int = 0


@ray.remote(num_cpus=0.25)
class SampleProducer:
    def __init__(self, index: int, cfg: dict):
        self.cfg = ImpalaConfig(**cfg)
        self.index = index
        self.rng = random.Random(self.cfg.seed * 31 + index)
        self.policy_version = 0

    def _rollout(self) -> list:
        return [(self.rng.random(), self.rng.randrange(4), self.rng.gauss(0, 1))
                for _ in range(self.cfg.rollout_len)]

    def sample_sync(self) -> list:
        return self._rollout()

    def run(self, queue: Queue) -> int:
        for _ in range(self.cfg.batches_per_sampler):
            queue.put((self.index, self.policy_version, self._rollout()))
        return self.cfg.batches_per_sampler


@ray.remote(num_cpus=0.25)
class Learner:
    def __init__(self, queue: Queue, cfg: dict):
        self.cfg = ImpalaConfig(**cfg)
        self.queue = queue
        self.theta = [0.0] * 4
        self.updates = 0

    def restore(self, path: str) -> int:
        self.updates = 400  # pretend: read the optimizer state and weights from `path`
        return self.updates

    def update(self, batch: list) -> float:
        loss = 0.0
        for _obs, action, ret in batch:
            err = ret - self.theta[action]
            self.theta[action] += self.cfg.lr * err
            loss += err * err / len(batch)
        self.updates += 1
        return loss

    def fit(self) -> dict:
        loss = float("nan")
        for _ in range(self.cfg.num_updates):
            _sampler, _version, batch = self.queue.get()
            loss = self.update(batch)
            if self.updates % 10 == 0:
                print(f"[learner] update {self.updates} loss {loss:.4f}", flush=True)
        return {"updates": self.updates, "loss": loss}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = ImpalaConfig()
    queue = Queue(maxsize=8)
    samplers = [SampleProducer.remote(i, asdict(cfg)) for i in range(cfg.num_samplers)]
    learner = Learner.remote(queue, asdict(cfg))

    if not cfg.resume_from:
        # fresh run: a few synchronous batches so the learner's statistics are initialised
        for _ in range(cfg.warmup_batches):
            for batch in ray.get([s.sample_sync.remote() for s in samplers]):
                ray.get(learner.update.remote(batch))
        print("warm-up done", flush=True)
        # background sampling for the rest of training
        for s in samplers:
            s.run.remote(queue)
    else:
        updates = ray.get(learner.restore.remote(cfg.resume_from))
        print(f"resumed from {cfg.resume_from} at update {updates}", flush=True)

    print("READY: Learner.fit -> Queue.get (samplers feed the queue)", flush=True)
    print(f"result: {ray.get(learner.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
