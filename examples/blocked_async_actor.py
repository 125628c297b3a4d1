"""Async policy server whose coroutine waits with time.sleep and blocks its own event loop.

Scenario
    On-policy RL with a ``PolicyServer`` async actor: a ``RolloutWorker`` asks it to generate
    actions with weights at least as new as ``min_version``; the driver (the learner) pushes new
    weights with ``update_weights`` after every step. After ``prefetch_from_step`` the driver
    prefetches the next rollout before pushing the weights it needs, so ``generate`` has to wait
    for ``update_weights``.

Mechanism
    ``PolicyServer.generate`` waits for the new version with ``while self.version < min_version:
    time.sleep(...)`` -- a synchronous sleep inside ``async def``. That blocks the actor's only
    event loop, so ``update_weights`` (another coroutine on the same loop) can never run and the
    version never advances. Step 0 is not prefetched and succeeds. In step 1 the rollout for
    step 2 is prefetched; its ``generate`` reaches the server while the learner update (a few
    hundred ms of SGD) is still running, so it is already stuck in ``time.sleep`` when
    ``update_weights(2)`` arrives. RolloutWorker.collect waits in ``ray.get`` on ``generate``,
    the driver waits in ``ray.get`` on ``update_weights``; both PolicyServer tasks are RUNNING in the State API (for async actors
    RUNNING only means "handed to the event loop").

What misleads
    Two methods of the async actor are RUNNING, so both seem to execute (or py-spy looks broken,
    since only one is on a stack). Wrong: for an async actor RUNNING means "handed to the event
    loop"; a synchronous ``time.sleep``/``ray.get`` inside one coroutine blocks the loop and
    every other call.

Expected diagnosis
    ``async-loop-blocked``: the PolicyServer's event-loop thread shows ``PolicyServer.generate``
    (a coroutine) in ``time.sleep`` (thread idle), i.e. a synchronous blocking call inside the
    loop; ``update_weights`` is RUNNING in the State API but on no stack. Culprit: PolicyServer.
    Fix: ``await asyncio.sleep`` / an ``asyncio.Event``.
"""

import asyncio  # noqa: F401 - the fix would use it
import os
import random
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "async-loop-blocked",
    "culprits": [{"class_name": "PolicyServer", "rank": None}],
    "notes": "PolicyServer (async actor) coroutine generate() waits for min_version with "
    "time.sleep in a loop, blocking the event loop; update_weights (same loop) never runs. "
    "RolloutWorker.collect in ray.get on generate; driver in ray.get on update_weights.",
}


@dataclass
class OnPolicyConfig:
    num_steps: int = 10
    prefetch_from_step: int = 2
    rollout_len: int = 32
    obs_dim: int = 4
    lr: float = 0.1
    update_epochs: int = 6000  # SGD passes over the rollout per learner step
    poll_s: float = 0.05
    seed: int = 5


@ray.remote(num_cpus=0.1)
class PolicyServer:
    def __init__(self, cfg: dict):
        self.cfg = OnPolicyConfig(**cfg)
        self.version = 0
        self.weights = [0.0] * self.cfg.obs_dim

    async def update_weights(self, version: int, weights: list) -> int:
        self.weights, self.version = list(weights), version
        return self.version

    async def generate(self, observations: list, min_version: int) -> list:
        while self.version < min_version:  # wait for on-policy weights
            time.sleep(self.cfg.poll_s)
        return [1 if sum(w * o for w, o in zip(self.weights, obs)) > 0 else 0
                for obs in observations]


@ray.remote(num_cpus=0.1)
class RolloutWorker:
    def __init__(self, server, cfg: dict):
        self.cfg = OnPolicyConfig(**cfg)
        self.server = server
        self.rng = random.Random(self.cfg.seed)

    def collect(self, min_version: int) -> list:
        obs = [[self.rng.gauss(0, 1) for _ in range(self.cfg.obs_dim)]
               for _ in range(self.cfg.rollout_len)]
        actions = ray.get(self.server.generate.remote(obs, min_version))
        return [(o, a, float(a == (o[0] > 0))) for o, a in zip(obs, actions)]


def policy_gradient(weights: list, batch: list, lr: float, epochs: int) -> list:
    for _ in range(epochs):
        grad = [0.0] * len(weights)
        for obs, action, reward in batch:
            for i, o in enumerate(obs):
                grad[i] += (reward - 0.5) * (1 if action else -1) * o
        weights = [w + lr / epochs * g / len(batch) for w, g in zip(weights, grad)]
    return weights


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = OnPolicyConfig()
    server = PolicyServer.remote(asdict(cfg))
    rollout = RolloutWorker.remote(server, asdict(cfg))
    weights = [0.0] * cfg.obs_dim
    next_batch = rollout.collect.remote(min_version=0)
    for step in range(cfg.num_steps):
        batch = ray.get(next_batch)
        prefetch = step + 1 >= cfg.prefetch_from_step
        if prefetch:  # overlap the next rollout with this update
            next_batch = rollout.collect.remote(min_version=step + 1)
            print(f"READY: step {step}: RolloutWorker.collect(min_version={step + 1}) -> "
                  "PolicyServer.generate before update_weights", flush=True)
        weights = policy_gradient(weights, batch, cfg.lr, cfg.update_epochs)
        ray.get(server.update_weights.remote(step + 1, weights))
        if not prefetch:
            next_batch = rollout.collect.remote(min_version=step + 1)
        mean_r = sum(r for _, _, r in batch) / len(batch)
        print(f"step {step}: mean reward {mean_r:.3f}, pushed weights v{step + 1}", flush=True)


if __name__ == "__main__":
    main()
