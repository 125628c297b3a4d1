"""Trainers all-reduce with a third rank that lives outside the job: a detached stats hub of another job.

Scenario: a monitoring team's StatsHub joins every training run's gloo group as the last rank
(world = trainers + 1) so it can reduce statistics. It is started by a separate driver (another
Ray job, namespace "monitoring", detached) which exits at once. The hub takes part in the first 3
all-reduces (warm-up statistics), then only reduces tensors handed to it by publish(). The new
trainer code no longer calls publish(); trainers 0 and 1 all-reduce their gradients every step, so
from step 4 on they wait in all_reduce for rank 2, whose reducer thread waits in queue.get.

Mechanism: a collective with a member outside the job: the job has 2 ranks of a world of 3;
the third is a detached actor of another (finished) job, idle in Queue.get on its own thread.
Truth: culprit StatsHub ("stats-hub", namespace monitoring, rank 2) -- not in the collective; the
trainers are victims. Fix: call hub.publish every step (or do not put the hub in the gradient
group: give it its own group), and time out collectives.
"""
# redteam-settle: 30
# redteam-ray-start: --resources='{"rt_hub":1}'
import datetime
import os
import subprocess
import sys
import tempfile

import ray


@ray.remote(num_cpus=0.1)
class GradTrainer:
    def __init__(self, rank: int, world: int, store: str):
        import torch.distributed as dist
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=2))
        self.rank = rank

    def fit(self, steps: int) -> float:
        import torch
        import torch.distributed as dist
        w = torch.zeros(1024)
        for step in range(steps):
            g = torch.full((1024,), 0.001 * (step + self.rank))
            dist.all_reduce(g)
            w -= g
        return float(w.sum())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = os.path.join(tempfile.mkdtemp(prefix="grad_store_"), "store")
    # the monitoring team's launcher: a driver of its own, not part of this submission
    env = {k: v for k, v in os.environ.items() if k != "RAY_JOB_CONFIG_JSON_ENV_VAR"}
    hub = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_stats_hub_job.py"),
                            store, "2", "3"], env=env)
    trainers = [GradTrainer.remote(r, 3, store) for r in range(2)]
    refs = [t.fit.remote(50) for t in trainers]
    hub.wait(timeout=120)
    print("READY 2 trainers + stats hub", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
