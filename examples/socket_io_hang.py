"""RLHF-style rollout scoring that blocks forever reading from a reward service that never answers.

Scenario
    ``RolloutWorker`` actors generate responses; a ``RewardScorer`` actor scores them by sending
    line-delimited JSON requests to a reward-model service over TCP and reading the reply. The
    ``PPOTrainer`` actor collects scored rollouts and does the policy update. In production the
    reward service runs outside the Ray cluster; here the driver stands in for it with a socket
    listening on 127.0.0.1 whose server never gets round to answering (a wedged service: the
    kernel completes the TCP handshake from the listen backlog, so ``connect`` succeeds, but
    nothing ever reads the request or writes a reply).

Mechanism
    ``RewardScorer._request`` does ``sock.sendall(request)`` then ``sock.recv(...)`` on a socket
    created without a timeout (``reward_timeout_s=None``: "the reward model can be slow on long
    responses"). The first request never gets a reply, so the scorer's method never returns;
    the trainer waits in ``ray.get`` on it and the driver waits on the trainer. Ray sees an ALIVE
    actor with a RUNNING task, no error, no pending resources.

What misleads
    The RewardScorer's actor is ALIVE with a RUNNING task and an idle main thread, so it looks
    like it waits on Ray or just works slowly. Wrong: its innermost job line is ``sock.recv`` on
    a socket with no timeout; the service at the other end accepted the connection and never
    answers.

Expected diagnosis
    ``io-wait``: RewardScorer's main thread is idle in ``RewardScorer._request`` at
    ``sock.recv`` (a socket read with no timeout; the socket method is C code, so py-spy shows the
    job's own line as the innermost frame). The chain ends there: the cause is the endpoint
    (127.0.0.1:<port>) that does not answer. Culprit: RewardScorer. PPOTrainer.train waits in
    ray.get on RewardScorer.score; the driver waits on PPOTrainer.train.
"""

import json
import os
import random
import socket
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "io-wait",
    "culprits": [{"class_name": "RewardScorer", "rank": None}],
    "notes": "RewardScorer._request sends a scoring request and blocks in sock.recv() with no "
    "timeout; the reward service (stand-in: a listening socket on 127.0.0.1 that never accepts) "
    "never answers. PPOTrainer.train in ray.get on RewardScorer.score; driver on the trainer.",
}


@dataclass
class PPOConfig:
    reward_host: str = "127.0.0.1"
    reward_port: int = 0  # filled in by the driver
    reward_timeout_s: float | None = None  # "the reward model can be slow on long responses"
    num_rollout_workers: int = 2
    prompts_per_worker: int = 4
    max_new_tokens: int = 24
    num_iterations: int = 3
    seed: int = 0


@ray.remote(num_cpus=0.25)
class RolloutWorker:
    def __init__(self, index: int, cfg: dict):
        self.cfg = PPOConfig(**cfg)
        self.index = index
        self.rng = random.Random(self.cfg.seed * 101 + index)

    def generate(self, iteration: int) -> list:
        vocab = ["the", "model", "answers", "politely", "with", "a", "short", "reply", "."]
        out = []
        for p in range(self.cfg.prompts_per_worker):
            n = self.rng.randint(4, self.cfg.max_new_tokens)
            out.append({"prompt_id": f"{iteration}-{self.index}-{p}",
                        "response": " ".join(self.rng.choice(vocab) for _ in range(n))})
        return out


@ray.remote(num_cpus=0.25)
class RewardScorer:
    def __init__(self, cfg: dict):
        self.cfg = PPOConfig(**cfg)
        self._sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = socket.create_connection((self.cfg.reward_host, self.cfg.reward_port),
                                                  timeout=self.cfg.reward_timeout_s)
        return self._sock

    def _request(self, payload: dict) -> dict:
        sock = self._connect()
        sock.sendall((json.dumps(payload) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("reward service closed the connection")
            buf += chunk
        return json.loads(buf)

    def score(self, rollouts: list) -> list:
        reply = self._request({"model": "rm-7b", "texts": [r["response"] for r in rollouts]})
        return [dict(r, reward=s) for r, s in zip(rollouts, reply["scores"])]


@ray.remote(num_cpus=0.25)
class PPOTrainer:
    def __init__(self, workers: list, scorer, cfg: dict):
        self.cfg = PPOConfig(**cfg)
        self.workers = workers
        self.scorer = scorer
        self.baseline = 0.0

    def train(self) -> float:
        for it in range(self.cfg.num_iterations):
            rollouts = [r for batch in ray.get([w.generate.remote(it) for w in self.workers]) for r in batch]
            print(f"[trainer] iteration {it}: {len(rollouts)} rollouts, scoring", flush=True)
            scored = ray.get(self.scorer.score.remote(rollouts))
            mean = sum(r["reward"] for r in scored) / len(scored)
            self.baseline = 0.9 * self.baseline + 0.1 * mean
            print(f"[trainer] iteration {it}: mean reward {mean:.3f}", flush=True)
        return self.baseline


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    # Stand-in for the external reward service: it listens, but never serves a request.
    service = socket.create_server(("127.0.0.1", 0), backlog=16)
    cfg = PPOConfig(reward_port=service.getsockname()[1])
    print(f"reward service at {cfg.reward_host}:{cfg.reward_port}", flush=True)
    workers = [RolloutWorker.remote(i, asdict(cfg)) for i in range(cfg.num_rollout_workers)]
    scorer = RewardScorer.remote(asdict(cfg))
    trainer = PPOTrainer.remote(workers, scorer, asdict(cfg))
    print("READY: PPOTrainer.train -> RewardScorer.score -> reward service (TCP)", flush=True)
    print(f"baseline: {ray.get(trainer.train.remote())}", flush=True)
    service.close()


if __name__ == "__main__":
    main()
