"""Parameter-server training where the server calls back into the learner: a call cycle.

Scenario
    A ``Learner`` actor computes gradients on its data shard and pushes them to a
    ``ParameterServer`` actor with ``ray.get(ps.apply_gradients.remote(...))``. Every
    ``stats_every`` updates the ParameterServer wants to log the learner's throughput, so inside
    ``apply_gradients`` it calls ``ray.get(learner.get_stats.remote())``.

Mechanism
    Both actors have the default ``max_concurrency=1``. At update 3 the call chain is
    ``Learner.train_step`` --ray.get--> ``ParameterServer.apply_gradients`` --ray.get-->
    ``Learner.get_stats``. ``get_stats`` is queued behind ``train_step`` on the Learner, which is
    itself waiting for ``apply_gradients``: a two-actor wait-for cycle. Updates 0-2 succeed
    (no stats call), so the job looks healthy at first.

What misleads
    Both actors sit idle in ``ray.get``, so each looks like a victim of the other and no stack
    looks guilty; dumping the Learner to find ``get_stats`` finds nothing. The evidence is
    state, not a stack: the call each waits for is ``SUBMITTED_TO_WORKER`` with no
    ``worker_pid``, queued on the actor that is itself waiting - a cycle.

Expected diagnosis
    ``actor-call-cycle``: Learner.train_step (RUNNING, in ray.get) waits on
    ParameterServer.apply_gradients (RUNNING, in ray.get) which waits on Learner.get_stats
    (queued, never started: SUBMITTED_TO_WORKER with no worker pid). Both classes are culprits;
    the driver, waiting on Learner.train_step, is a victim. Fix: make the stats call
    asynchronous (no ray.get inside the server), or give the Learner a concurrency group for it.
"""

import os
import random
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "actor-call-cycle",
    "culprits": [
        {"class_name": "Learner", "rank": None},
        {"class_name": "ParameterServer", "rank": None},
    ],
    "notes": "Learner.train_step ray.get -> ParameterServer.apply_gradients ray.get -> "
    "Learner.get_stats, queued behind train_step (max_concurrency=1); deadlock at update 3 "
    "(stats_every=3). Driver waits on Learner.train_step.",
}


@dataclass
class PSConfig:
    num_params: int = 64
    lr: float = 0.05
    num_updates: int = 20
    stats_every: int = 3
    shard_size: int = 256
    seed: int = 1


@ray.remote(num_cpus=0.25)
class ParameterServer:
    def __init__(self, cfg: dict):
        self.cfg = PSConfig(**cfg)
        self.params = [0.0] * self.cfg.num_params
        self.version = 0
        self.learner = None

    def register_learner(self, learner) -> None:
        self.learner = learner

    def get_params(self) -> tuple:
        return self.version, list(self.params)

    def apply_gradients(self, grads: list) -> int:
        for i, g in enumerate(grads):
            self.params[i] -= self.cfg.lr * g
        self.version += 1
        if self.learner is not None and self.version % self.cfg.stats_every == 0:
            # Log learner throughput next to the parameter version -- synchronously.
            stats = ray.get(self.learner.get_stats.remote())
            print(f"[ps] version {self.version}: learner stats {stats}", flush=True)
        return self.version


@ray.remote(num_cpus=0.25)
class Learner:
    def __init__(self, ps, cfg: dict):
        self.cfg = PSConfig(**cfg)
        self.ps = ps
        rng = random.Random(self.cfg.seed)
        self.target = [rng.uniform(-1, 1) for _ in range(self.cfg.num_params)]
        self.samples_seen = 0

    def get_stats(self) -> dict:
        return {"samples_seen": self.samples_seen}

    def train_step(self, step: int) -> dict:
        version, params = ray.get(self.ps.get_params.remote())
        grads = [p - t for p, t in zip(params, self.target)]
        loss = sum(g * g for g in grads) / len(grads)
        self.samples_seen += self.cfg.shard_size
        new_version = ray.get(self.ps.apply_gradients.remote(grads))
        return {"step": step, "loss": loss, "version": new_version}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = PSConfig()
    ps = ParameterServer.remote(asdict(cfg))
    learner = Learner.remote(ps, asdict(cfg))
    ray.get(ps.register_learner.remote(learner))

    for step in range(cfg.num_updates):
        if (step + 1) % cfg.stats_every == 0:
            print(f"READY: Learner.train_step({step}) <-> ParameterServer.apply_gradients", flush=True)
        out = ray.get(learner.train_step.remote(step))
        print(f"step {out['step']}: loss {out['loss']:.4f} (params v{out['version']})", flush=True)
    print("training finished", flush=True)


if __name__ == "__main__":
    main()
