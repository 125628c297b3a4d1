"""Trainers broadcast their weights to a rank that lives outside the job, and it never takes part.

Scenario
    Two ``Trainer`` actors (gloo, one per rank) train data-parallel on their own group
    (``new_group([0, 1])``). At the end of each epoch rank 0 broadcasts the weights over the world
    group, whose last rank is the serving team's ``WeightPublisher``: a detached actor started by
    a launcher of their own (another Ray job, namespace ``serving``, whose driver exits at once),
    joined with ``WORLD_SIZE=3``. The publisher takes part only once it is armed (``arm()``, when
    the serving model is loaded); the launcher exits before arming it.

Mechanism
    Both trainers wait in ``dist.barrier`` before the broadcast, at the same line, and no process of the job is
    anywhere else: nothing in the job can complete the collective. Its third member is a process
    of another job, idle in ``Event.wait`` on its own thread; gloo pairs the members by TCP, so
    each trainer has a connection to it, and no Ray call links them. The trainers' WORLD_SIZE is
    3, the job has 2 ranks. No error anywhere (the collective timeout is hours).

What misleads
    The two trainers are the only processes of the job in the report, both in ``dist.barrier``: a
    network problem, or one of them to blame. Wrong: the missing member is outside the job; the
    trainers are its victims.

Expected diagnosis
    ``collective-incomplete``: both trainers wait in ``barrier`` called from
    ``Trainer._publish``; the member of their group that is not in it is the ``WeightPublisher``
    actor of another job (detached), connected to both by TCP. Fix: arm the publisher before the
    trainers publish (or give it a group of its own, and time out collectives).
"""

import datetime
import os
import subprocess
import sys
import tempfile
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "collective-incomplete",
    "culprits": [{"class_name": "WeightPublisher", "rank": None}],
    "notes": "2 Trainers (WORLD_SIZE=3) wait in dist.barrier at the same line; the third member is a "
    "detached WeightPublisher of another job, never armed (Event.wait), connected to both by gloo's TCP.",
}

WORLD = 3  # two trainers and the publisher


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, rank: int) -> None:
        self.rank = rank

    def setup(self, store: str) -> int:
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"file://{store}", rank=self.rank, world_size=WORLD,
                                timeout=datetime.timedelta(hours=2))
        self.dp = dist.new_group(list(range(WORLD - 1)))
        return os.getpid()

    def _publish(self, weights) -> None:
        import torch.distributed as dist

        dist.barrier()  # every member ready before the weights go out
        dist.broadcast(weights, src=0)

    def train(self, epochs: int) -> float:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        weights = torch.zeros(64)
        for epoch in range(epochs):
            grads = torch.full((64,), 0.01 * (epoch + self.rank))
            dist.all_reduce(grads, group=self.dp)
            weights -= grads
            print(f"[rank {self.rank}] epoch {epoch} done", flush=True)
            self._publish(weights)
        return float(weights.sum())


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = os.path.join(tempfile.mkdtemp(prefix="weights_store_"), "store")
    env = {k: v for k, v in os.environ.items() if k != "RAY_JOB_CONFIG_JSON_ENV_VAR"}  # a job of its own
    launcher = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "_weight_publisher_job.py"), store, str(WORLD - 1), str(WORLD)],
                                env=env)
    trainers = [Trainer.options(runtime_env={"env_vars": {"GLOO_SOCKET_IFNAME": "lo", "WORLD_SIZE": str(WORLD)}})
                .remote(r) for r in range(WORLD - 1)]
    print(f"process group up: trainer pids {ray.get([t.setup.remote(store) for t in trainers], timeout=300)}",
          flush=True)
    launcher.wait(timeout=120)
    time.sleep(1)
    print("READY: trainers publish their weights to the serving rank", flush=True)
    print(ray.get([t.train.remote(3) for t in trainers]), flush=True)


if __name__ == "__main__":
    main()
