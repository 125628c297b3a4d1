"""DQN-style off-policy training whose replay buffer never becomes "warm".

Scenario
    Two ``RolloutWorker`` actors collect warm-up episodes and push the transitions into a
    ``ReplayBuffer`` actor. The ``Trainer`` actor then asks the buffer for its first
    training batch. ``ReplayBuffer.sample`` blocks until the buffer holds at least
    ``min_buffer_size`` transitions, which is the usual "learning starts" guard.

Mechanism
    ``min_buffer_size`` defaults to 50_000 (copied from an Atari config), but the warm-up phase
    only ever produces ``num_rollout_workers * warmup_episodes * episode_len`` = 2 * 4 * 16 = 128
    transitions, and no rollouts run while the trainer waits for its first batch. So
    ``ReplayBuffer.sample`` sleeps in a ``while len(self._storage) < min_buffer_size:
    time.sleep(...)`` poll forever. The buffer has the default ``max_concurrency=1``, so it is
    busy in that poll; the Trainer is blocked in ``ray.get`` on it, and the driver is blocked in
    ``ray.get`` on the Trainer. Nothing errors, no resources are pending.

What misleads
    ``ray status`` shows idle CPUs and no demands, and the culprit can be sampled between sleeps
    and look busy: "the cluster is fine, it computes". Wrong: it is an actor-only hang that only
    stacks show; a ``time.sleep(`` line in every sample is a poll whose condition (a threshold
    above what is produced) never becomes true.

Expected diagnosis
    Root cause: ``ReplayBuffer.sample`` polling (``time.sleep`` in a loop, thread idle) for a
    condition that is never satisfied. ``Trainer.train`` waits in ``ray.get`` on it and the
    driver waits on the Trainer: they are victims. The RolloutWorkers are idle (finished).
    Fix: lower ``min_buffer_size`` below what warm-up produces, or keep collecting while waiting.
"""

import os
import random
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "poll-never-satisfied",
    "culprits": [{"class_name": "ReplayBuffer", "rank": None}],
    "notes": "ReplayBuffer.sample polls time.sleep until len(storage) >= min_buffer_size "
    "(50000) but warm-up only produces 128 transitions; Trainer.train waits in ray.get on "
    "ReplayBuffer.sample, the driver waits in ray.get on Trainer.train; RolloutWorkers idle.",
}


@dataclass
class DQNConfig:
    env_name: str = "CartPole-lite"
    num_rollout_workers: int = 2
    warmup_episodes: int = 4  # per rollout worker
    episode_len: int = 16
    min_buffer_size: int = 50_000  # "learning_starts" -- copied from the Atari preset
    buffer_capacity: int = 100_000
    batch_size: int = 32
    num_train_steps: int = 100
    gamma: float = 0.99
    lr: float = 1e-3
    seed: int = 0


@ray.remote(num_cpus=0.25)
class RolloutWorker:
    def __init__(self, worker_index: int, cfg: dict):
        self.cfg = DQNConfig(**cfg)
        self.index = worker_index
        self.rng = random.Random(self.cfg.seed + worker_index)

    def collect_episode(self, episode: int) -> list:
        obs = [self.rng.uniform(-1, 1) for _ in range(4)]
        transitions = []
        for t in range(self.cfg.episode_len):
            action = self.rng.randrange(2)
            next_obs = [o + self.rng.gauss(0, 0.1) for o in obs]
            reward = 1.0
            done = t == self.cfg.episode_len - 1
            transitions.append((obs, action, reward, next_obs, done))
            obs = next_obs
        print(f"[rollout {self.index}] episode {episode}: {len(transitions)} steps", flush=True)
        return transitions


@ray.remote(num_cpus=0.25)
class ReplayBuffer:
    def __init__(self, cfg: dict):
        self.cfg = DQNConfig(**cfg)
        self._storage = []
        self._rng = random.Random(self.cfg.seed)

    def add(self, transitions: list) -> int:
        self._storage.extend(transitions)
        if len(self._storage) > self.cfg.buffer_capacity:
            del self._storage[: len(self._storage) - self.cfg.buffer_capacity]
        return len(self._storage)

    def size(self) -> int:
        return len(self._storage)

    def sample(self, batch_size: int) -> list:
        # "learning starts" guard: do not hand out batches from an almost empty buffer.
        while len(self._storage) < self.cfg.min_buffer_size:
            time.sleep(0.05)
        return self._rng.sample(self._storage, batch_size)


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, buffer, cfg: dict):
        self.cfg = DQNConfig(**cfg)
        self.buffer = buffer
        self.q = [0.0, 0.0]

    def train(self) -> dict:
        losses = []
        for step in range(self.cfg.num_train_steps):
            batch = ray.get(self.buffer.sample.remote(self.cfg.batch_size))
            td = [r + self.cfg.gamma * max(self.q) - self.q[a] for (_, a, r, _, _) in batch]
            for (_, a, _, _, _), err in zip(batch, td):
                self.q[a] += self.cfg.lr * err
            losses.append(sum(e * e for e in td) / len(td))
            if step % 10 == 0:
                print(f"[trainer] step {step} loss {losses[-1]:.4f}", flush=True)
        return {"final_loss": losses[-1], "q": self.q}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = DQNConfig()
    print(f"config: {asdict(cfg)}", flush=True)
    buffer = ReplayBuffer.remote(asdict(cfg))
    workers = [RolloutWorker.remote(i, asdict(cfg)) for i in range(cfg.num_rollout_workers)]
    trainer = Trainer.remote(buffer, asdict(cfg))

    # Warm-up: fill the replay buffer with random-policy episodes.
    sizes = []
    for ep in range(cfg.warmup_episodes):
        batches = ray.get([w.collect_episode.remote(ep) for w in workers])
        sizes = ray.get([buffer.add.remote(b) for b in batches])
    print(f"warm-up done: replay buffer holds {sizes[-1]} transitions", flush=True)

    print("READY: Trainer.train -> ReplayBuffer.sample (waits for min_buffer_size)", flush=True)
    result = ray.get(trainer.train.remote())
    print(f"training finished: {result}", flush=True)


if __name__ == "__main__":
    main()
