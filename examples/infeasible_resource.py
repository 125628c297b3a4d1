"""PPO-style loop whose reward model asks for a GPU on a CPU-only cluster.

Scenario
    A ``PolicyTrainer`` actor (CPU) and a ``RewardModel`` actor. The reward model's resources
    are derived from its config: ``device="cuda"`` (the default, because the model "normally runs
    on GPU") becomes ``num_gpus=1``. The driver warms up the policy for a few CPU-only steps, then
    scores the first rollout batch with ``ray.get(reward_model.score.remote(...))``.

Mechanism
    The cluster has no GPU, so the RewardModel actor can never be placed: it stays
    ``PENDING_CREATION`` (pid 0) and its ``score`` task waits for the actor forever. Ray does not
    fail the request: ``ray status -v`` shows a pending demand ``{'CPU': 1.0, 'GPU': 1.0}`` (the
    actor's implicit CPU included) and an autoscaler event says "No available node types can
    fulfill resource request" (the same line is echoed into the job's log as
    ``(autoscaler +Ns) Error: ...``), but no exception reaches the driver, which sits in
    ``ray.get``.

What misleads
    ``ray status`` lists the request as an ordinary pending demand and the actor as
    ``PENDING_CREATION``: "the cluster is busy, wait for the autoscaler". Wrong: no node is that
    large, so it can never be placed; compare the request with the largest node and look for the
    autoscaler's "No available node types" event.

Expected diagnosis
    ``infeasible-resource``: the RewardModel actor requests ``GPU: 1`` and no node has a GPU.
    No process is at fault in its stack (the driver is in ray.get); the culprit is the
    resource request of class RewardModel. Fix: ``device="cpu"`` or add a GPU node.
"""

import os
import random
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "infeasible-resource",
    "culprits": [{"class_name": "RewardModel", "rank": None}],
    "notes": "culprit is a resource request, not a process: RewardModel asks num_gpus=1 "
    "(device='cuda' default) on a CPU-only cluster; actor PENDING_CREATION pid 0, pending "
    "demand {'CPU': 1.0, 'GPU': 1.0}; driver waits in ray.get on RewardModel.score.",
}


@dataclass
class PPOConfig:
    reward_model_device: str = "cuda"
    policy_warmup_steps: int = 3
    rollout_batch: int = 16
    clip: float = 0.2
    lr: float = 3e-4
    seed: int = 7


@ray.remote(num_cpus=0.25)
class PolicyTrainer:
    def __init__(self, cfg: dict):
        self.cfg = PPOConfig(**cfg)
        self.rng = random.Random(self.cfg.seed)
        self.theta = [0.0] * 4

    def warmup_step(self, step: int) -> float:
        grad = [self.rng.gauss(0, 1) for _ in self.theta]
        self.theta = [t - self.cfg.lr * g for t, g in zip(self.theta, grad)]
        return sum(g * g for g in grad)

    def rollout(self, n: int) -> list:
        return [[self.rng.random() for _ in range(4)] for _ in range(n)]


@ray.remote
class RewardModel:
    def __init__(self, cfg: dict):
        self.cfg = PPOConfig(**cfg)

    def score(self, batch: list) -> list:
        return [sum(x) / len(x) for x in batch]


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = PPOConfig()
    policy = PolicyTrainer.remote(asdict(cfg))
    rm_gpus = 1 if cfg.reward_model_device == "cuda" else 0
    reward_model = RewardModel.options(num_gpus=rm_gpus).remote(asdict(cfg))

    for step in range(cfg.policy_warmup_steps):
        gnorm = ray.get(policy.warmup_step.remote(step))
        print(f"warmup step {step}: grad norm^2 {gnorm:.3f}", flush=True)
    batch = ray.get(policy.rollout.remote(cfg.rollout_batch))
    print(f"READY: RewardModel.score on {len(batch)} rollouts (RewardModel needs "
          f"num_gpus={rm_gpus})", flush=True)
    rewards = ray.get(reward_model.score.remote(batch))
    print(f"mean reward {sum(rewards) / len(rewards):.3f}", flush=True)


if __name__ == "__main__":
    main()
