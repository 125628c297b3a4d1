"""RLHF-style pipeline: Trainer -> ReplayBuffer -> RolloutWorker -> RewardModel, last link stuck.

Scenario
    The ``Trainer`` pulls batches from a ``ReplayBuffer``. The buffer starts with a few
    pre-scored SFT samples; when it runs dry it refills synchronously by asking a
    ``RolloutWorker`` to generate, and the RolloutWorker asks a ``RewardModel`` to score the
    generations. The RewardModel waits for its checkpoint to be published (a ``_SUCCESS`` marker
    written by the separate reward-model training run) before scoring.

Mechanism
    The config's ``reward_ckpt_dir`` points to a directory no one writes to (the reward-model
    run publishes elsewhere), so ``RewardModel.score`` polls ``os.path.exists(marker)`` with
    ``time.sleep`` forever. Steps 0-1 succeed from the seed samples; at step 2 the chain of
    synchronous ``ray.get`` calls forms: driver -> Trainer.fit -> ReplayBuffer.get_batch ->
    RolloutWorker.generate -> RewardModel.score (polling). Every actor has the default
    ``max_concurrency=1``; nothing errors, no resource demand is pending.

What misleads
    Four processes wait in ``ray.get``; the first one read (the trainer, then the buffer) looks
    like the problem. Wrong: each is a victim of the next; only the last link is not in
    ``ray.get``, and it looks healthy (idle, no error, no pending resource) because its poll
    condition is the bug.

Expected diagnosis
    ``poll-never-satisfied`` at the end of a 4-actor wait chain. RewardModel is the culprit (its
    thread is idle in ``time.sleep`` inside ``RewardModel.score``, not in ``ray.get``); Trainer,
    ReplayBuffer and RolloutWorker are each blocked in ``ray.get`` on the next link and are
    victims, as is the driver.
"""

import os
import random
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "poll-never-satisfied",
    "culprits": [{"class_name": "RewardModel", "rank": None}],
    "notes": "wait chain driver -> Trainer.fit -> ReplayBuffer.get_batch -> "
    "RolloutWorker.generate -> RewardModel.score; RewardModel.score polls (time.sleep) for a "
    "_SUCCESS marker in reward_ckpt_dir that is never written. Steps 0-1 succeed from seed data.",
}


@dataclass
class RLHFConfig:
    reward_ckpt_dir: str = "/tmp/debug_hang_example_rm/reward_model/latest"  # never published
    num_seed_samples: int = 16
    batch_size: int = 8
    rollout_batch_size: int = 8
    max_new_tokens: int = 12
    num_steps: int = 10
    ckpt_poll_s: float = 0.2
    seed: int = 3


@ray.remote(num_cpus=0.1)
class RewardModel:
    def __init__(self, cfg: dict):
        self.cfg = RLHFConfig(**cfg)
        self.weights = None

    def _wait_for_checkpoint(self) -> None:
        marker = os.path.join(self.cfg.reward_ckpt_dir, "_SUCCESS")
        while not os.path.exists(marker):
            time.sleep(self.cfg.ckpt_poll_s)
        self.weights = {"path": self.cfg.reward_ckpt_dir}

    def score(self, texts: list) -> list:
        if self.weights is None:
            self._wait_for_checkpoint()
        return [len(set(t.split())) / max(1, len(t.split())) for t in texts]


@ray.remote(num_cpus=0.1)
class RolloutWorker:
    def __init__(self, reward_model, cfg: dict):
        self.cfg = RLHFConfig(**cfg)
        self.reward_model = reward_model
        self.rng = random.Random(self.cfg.seed)
        self.vocab = "the a policy reward model value token step loss gradient batch".split()

    def generate(self, n: int) -> list:
        texts = [" ".join(self.rng.choice(self.vocab) for _ in range(self.cfg.max_new_tokens))
                 for _ in range(n)]
        rewards = ray.get(self.reward_model.score.remote(texts))
        return list(zip(texts, rewards))


@ray.remote(num_cpus=0.1)
class ReplayBuffer:
    def __init__(self, rollout_worker, cfg: dict):
        self.cfg = RLHFConfig(**cfg)
        self.rollout_worker = rollout_worker
        rng = random.Random(self.cfg.seed)
        self.items = [(f"sft sample {i}", rng.random()) for i in range(self.cfg.num_seed_samples)]

    def get_batch(self, batch_size: int) -> list:
        if len(self.items) < batch_size:
            fresh = ray.get(self.rollout_worker.generate.remote(self.cfg.rollout_batch_size))
            self.items.extend(fresh)
        batch, self.items = self.items[:batch_size], self.items[batch_size:]
        return batch


@ray.remote(num_cpus=0.1)
class Trainer:
    def __init__(self, buffer, cfg: dict):
        self.cfg = RLHFConfig(**cfg)
        self.buffer = buffer
        self.baseline = 0.0

    def fit(self) -> dict:
        for step in range(self.cfg.num_steps):
            batch = ray.get(self.buffer.get_batch.remote(self.cfg.batch_size))
            mean_reward = sum(r for _, r in batch) / len(batch)
            self.baseline = 0.9 * self.baseline + 0.1 * mean_reward
            print(f"[trainer] step {step}: mean reward {mean_reward:.3f} "
                  f"baseline {self.baseline:.3f}", flush=True)
        return {"baseline": self.baseline}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = RLHFConfig()
    reward_model = RewardModel.remote(asdict(cfg))
    rollout = RolloutWorker.remote(reward_model, asdict(cfg))
    buffer = ReplayBuffer.remote(rollout, asdict(cfg))
    trainer = Trainer.remote(buffer, asdict(cfg))
    print("READY: Trainer.fit -> ReplayBuffer.get_batch -> RolloutWorker.generate -> "
          "RewardModel.score (refill at step 2)", flush=True)
    result = ray.get(trainer.fit.remote())
    print(f"done: {result}", flush=True)


if __name__ == "__main__":
    main()
