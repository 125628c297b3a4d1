"""A healthy but slow actor-critic loop: looks idle in any single stack dump, but progresses.

Scenario
    Two ``EnvRunner`` actors step slow simulators (each env step waits on "the simulator" with
    ``time.sleep``), ``compute_returns`` tasks post-process each rollout, and a ``Learner`` actor
    applies an update that also takes a while (it "waits for the accelerator"). One iteration
    takes about 1.2 s; 500 iterations take about 10 minutes, then the job ends successfully.

Mechanism
    Nothing is wrong. Almost every process is idle at any moment: the driver is in ``ray.get``,
    the EnvRunners and Learner are in ``time.sleep``, and two dumps taken 1 s apart can be
    identical when both land in the same sleep. What shows progress: new ``compute_returns``
    and actor tasks keep reaching FINISHED in the State API, task ids advance, and the
    ``iteration N`` log line keeps counting.

What misleads
    Every single dump shows processes idle in ``ray.get`` or ``time.sleep``, and one even
    matches a poll pattern: it looks hung. Wrong: tasks keep reaching FINISHED between two
    listings - it is slow, not stuck; check progress before calling a hang.

Expected diagnosis
    ``no-hang``: stacks move between samples taken over a few seconds (different methods /
    iterations), the count of FINISHED tasks grows, no task is stuck RUNNING for long. A tool
    that calls "every thread idle" a hang gets this one wrong.
"""

import os
import random
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "no-hang",
    "pattern": None,
    "culprits": [],
    "notes": "healthy: ~1.2 s per iteration (sleep-based simulator and learner waits), "
    "~500 iterations (~10 min) then exits 0. Processes are mostly idle in time.sleep or "
    "ray.get, but FINISHED task counts grow steadily.",
}


@dataclass
class ACConfig:
    num_iterations: int = 500
    num_env_runners: int = 2
    rollout_len: int = 8
    sim_step_s: float = 0.06  # simulator latency per env step
    learner_step_s: float = 0.5  # "accelerator" time per update
    gamma: float = 0.98
    lr: float = 0.05
    seed: int = 4


@ray.remote(num_cpus=0.1)
class EnvRunner:
    def __init__(self, index: int, cfg: dict):
        self.cfg = ACConfig(**cfg)
        self.rng = random.Random(self.cfg.seed + index)
        self.index = index

    def rollout(self, policy: list) -> list:
        traj = []
        for _ in range(self.cfg.rollout_len):
            time.sleep(self.cfg.sim_step_s)  # wait for the simulator
            obs = [self.rng.gauss(0, 1) for _ in policy]
            action = 1 if sum(p * o for p, o in zip(policy, obs)) > 0 else 0
            traj.append((obs, action, float(action == (obs[0] > 0))))
        return traj


@ray.remote(num_cpus=0.1)
def compute_returns(traj: list, gamma: float) -> list:
    ret, out = 0.0, []
    for obs, action, reward in reversed(traj):
        ret = reward + gamma * ret
        out.append((obs, action, ret))
    return list(reversed(out))


@ray.remote(num_cpus=0.1)
class Learner:
    def __init__(self, dim: int, cfg: dict):
        self.cfg = ACConfig(**cfg)
        self.policy = [0.0] * dim

    def update(self, batches: list) -> tuple:
        time.sleep(self.cfg.learner_step_s)  # wait for the accelerator
        n = 0
        for batch in batches:
            for obs, action, ret in batch:
                sign = 1 if action else -1
                self.policy = [p + self.cfg.lr * sign * ret * o / 100
                               for p, o in zip(self.policy, obs)]
                n += 1
        return list(self.policy), n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = ACConfig()
    runners = [EnvRunner.remote(i, asdict(cfg)) for i in range(cfg.num_env_runners)]
    learner = Learner.remote(4, asdict(cfg))
    policy = [0.0] * 4
    start = time.time()
    for it in range(cfg.num_iterations):
        trajs = ray.get([r.rollout.remote(policy) for r in runners])
        batches = ray.get([compute_returns.remote(t, cfg.gamma) for t in trajs])
        policy, n = ray.get(learner.update.remote(batches))
        if it == 2:
            print("READY: healthy slow loop running (about 1.2 s per iteration)", flush=True)
        print(f"iteration {it}: {n} samples, {time.time() - start:.0f}s elapsed", flush=True)
    print(f"finished {cfg.num_iterations} iterations in {time.time() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
