"""Training runs healthily for about ten seconds, then hangs at its first evaluation.

Scenario
    A ``Trainer`` actor runs training steps: each step fans out ``grad_shard`` tasks over the
    data shards, averages their gradients and logs the loss (about 0.5 s a step). Every
    ``eval_every`` steps the Trainer asks an ``Evaluator`` actor to score the model, and the
    Evaluator, to be sure it scores the newest weights, pulls them from the Trainer with
    ``ray.get(trainer.get_weights.remote())``.

Mechanism
    Both actors have the default ``max_concurrency=1``. Steps 0-19 finish (tasks complete, the
    log grows): the job looks healthy. At step 20 ``Trainer.train_step`` blocks in
    ``ray.get(evaluator.evaluate.remote())``; ``Evaluator.evaluate`` blocks in
    ``ray.get(trainer.get_weights.remote())``, and ``get_weights`` is queued behind the
    ``train_step`` that waits for it: a two-actor wait-for cycle. From then on no task finishes
    and the log is silent — what ``debug-hang watch`` notices.

What misleads
    Twenty healthy steps came first, so ``Trainer.train_step FINISHED x20`` reads as a job that
    runs, and a short test run never reaches the hang. Wrong: finished steps are history, not
    progress; at step 20 the first evaluation closes a cycle - the Evaluator's ``get_weights``
    call is queued behind the ``train_step`` that waits for it.

Expected diagnosis
    ``actor-call-cycle``: Trainer.train_step (RUNNING, in ray.get) waits on Evaluator.evaluate
    (RUNNING, in ray.get), which waits on Trainer.get_weights (queued, never started). Both
    classes are culprits; the driver, waiting on Trainer.train_step, is a victim. Fix: pass the
    weights to ``evaluate`` as an argument (or an object ref), or give ``get_weights`` its own
    concurrency group.
"""

import os
import random
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "actor-call-cycle",
    "culprits": [
        {"class_name": "Trainer", "rank": None},
        {"class_name": "Evaluator", "rank": None},
    ],
    "ready": "READY",
    "notes": "healthy for 20 steps (~10 s: grad_shard tasks finish, the loss is logged), then "
    "Trainer.train_step ray.get -> Evaluator.evaluate ray.get -> Trainer.get_weights, queued "
    "behind train_step (max_concurrency=1). The driver prints READY just before step 20.",
}


@dataclass
class TrainConfig:
    num_steps: int = 200
    eval_every: int = 20
    num_shards: int = 2
    dim: int = 32
    lr: float = 0.1
    step_pause_s: float = 0.4  # the rest of a step ("the accelerator")
    seed: int = 7


@ray.remote(num_cpus=0.1)
def grad_shard(weights: list, target: list, shard: int) -> list:
    rng = random.Random(shard)
    noise = [rng.gauss(0, 0.01) for _ in weights]
    return [w - t + n for w, t, n in zip(weights, target, noise)]


@ray.remote(num_cpus=0.25)
class Evaluator:
    def __init__(self, target: list):
        self.target = target
        self.trainer = None

    def attach(self, trainer) -> None:
        self.trainer = trainer

    def evaluate(self, step: int) -> float:
        weights = ray.get(self.trainer.get_weights.remote())  # the newest weights, from the Trainer
        return sum((w - t) ** 2 for w, t in zip(weights, self.target)) / len(weights)


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, evaluator, cfg: dict):
        self.cfg = TrainConfig(**cfg)
        rng = random.Random(self.cfg.seed)
        self.target = [rng.uniform(-1, 1) for _ in range(self.cfg.dim)]
        self.weights = [0.0] * self.cfg.dim
        self.evaluator = evaluator

    def get_weights(self) -> list:
        return list(self.weights)

    def train_step(self, step: int) -> dict:
        grads = ray.get([grad_shard.remote(self.weights, self.target, s) for s in range(self.cfg.num_shards)])
        avg = [sum(g) / len(g) for g in zip(*grads)]
        self.weights = [w - self.cfg.lr * g for w, g in zip(self.weights, avg)]
        time.sleep(self.cfg.step_pause_s)
        out = {"step": step, "loss": sum(g * g for g in avg) / len(avg)}
        if step > 0 and step % self.cfg.eval_every == 0:
            out["eval"] = ray.get(self.evaluator.evaluate.remote(step))
        return out


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = TrainConfig()
    rng = random.Random(cfg.seed)
    evaluator = Evaluator.remote([rng.uniform(-1, 1) for _ in range(cfg.dim)])
    trainer = Trainer.remote(evaluator, asdict(cfg))
    ray.get(evaluator.attach.remote(trainer))
    for step in range(cfg.num_steps):
        if step > 0 and step % cfg.eval_every == 0:
            print(f"READY: step {step} runs the first evaluation (Trainer.train_step -> Evaluator.evaluate "
                  "-> Trainer.get_weights)", flush=True)
        out = ray.get(trainer.train_step.remote(step))
        print(f"step {out['step']}: loss {out['loss']:.4f}" + (f", eval {out['eval']:.4f}" if "eval" in out else ""),
              flush=True)
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
