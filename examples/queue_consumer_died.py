"""Rollout workers block on a full, bounded queue whose learner-side consumer raised.

Scenario
    An actor-learner setup with back-pressure: a ``RolloutWorker`` pushes trajectories into a
    ``ray.util.queue.Queue(maxsize=4)``; a ``TrajectoryConsumer`` actor drains it in a loop
    started fire-and-forget (``consumer.run.remote(queue)``, the ref never awaited), stacking
    trajectories into training batches. The driver waits for the rollout worker to finish its
    episodes.

Mechanism
    Trajectory 5 comes back truncated (``"rewards": None``, an env that timed out). The consumer
    raises ``TypeError`` on ``sum(None)``; its ``run`` task is FAILED, the actor ALIVE and idle,
    and since nobody holds the ref the error appears only as an "Unhandled error" line in the
    driver log. The queue fills to 4 and the worker's ``queue.put`` waits forever: the
    ``_QueueActor``'s ``put`` stays RUNNING, the worker waits in ``ray.get`` on it, the driver on
    the worker.

What misleads
    The RolloutWorker waits on ``queue.put``, which looks like back-pressure from a slow
    learner. Wrong: the queue is full because its consumer's ``run`` task FAILED with
    ``TypeError``; nobody held the ref, so the error is only an "Unhandled error" line in the
    driver log while the actor stays ALIVE.

Expected diagnosis
    ``consumer-gone``: the chain driver → RolloutWorker → _QueueActor (a put on a full queue) →
    TrajectoryConsumer, whose ``run`` task FAILED with ``TypeError``.
"""

import os

import ray
from ray.util.queue import Queue

EXPECTED = {
    "verdict": "hang",
    "pattern": "consumer-gone",
    "culprits": [{"class_name": "TrajectoryConsumer", "rank": None}],
    "notes": "bounded ray.util.queue (maxsize=4): the consumer's fire-and-forget run task raised "
    "TypeError on a truncated trajectory; the producer's put blocks on the full queue.",
}


@ray.remote(num_cpus=0.25)
class RolloutWorker:
    def run(self, queue, episodes: int) -> int:
        for episode in range(episodes):
            truncated = episode == 5  # the env timed out mid-episode
            queue.put({"episode": episode, "rewards": None if truncated else [1.0] * 8})
            print(f"pushed episode {episode}", flush=True)
        return episodes


@ray.remote(num_cpus=0.25)
class TrajectoryConsumer:
    def __init__(self):
        self.batches = 0

    def run(self, queue) -> None:
        batch = []
        while True:
            trajectory = queue.get()
            batch.append(sum(trajectory["rewards"]))
            if len(batch) == 4:
                self.batches += 1
                batch = []


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    queue = Queue(maxsize=4, actor_options={"num_cpus": 0.1})
    consumer = TrajectoryConsumer.remote()
    worker = RolloutWorker.remote()
    consumer.run.remote(queue)  # drains in the background; the ref is never awaited
    print("READY: collecting 50 episodes", flush=True)
    print(f"collected {ray.get(worker.run.remote(queue, 50))} episodes", flush=True)


if __name__ == "__main__":
    main()
