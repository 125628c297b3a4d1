"""A coordinator actor restarted after a crash lost its registrations; the trainer waits for them.

Mechanism: Coordinator (max_restarts=1) counts worker registrations in memory. Both workers
register, then the coordinator's process dies (os._exit, standing in for an OOM kill) and Ray
restarts it: __init__ runs again and the count is 0. Trainer.run then polls
ray.get(coord.ready.remote()) every 0.5 s until both are registered; the workers registered
already and never will again. Driver in ray.get(trainer.run).
Truth: culprit the Coordinator restart (in-memory state lost across a restart; registrations not
replayed); fix: persist/replay registrations on restart (or have workers re-register when the
coordinator restarts), bound the wait.
"""
import os
import time

import ray


@ray.remote(num_cpus=0.1, max_restarts=1)
class Coordinator:
    def __init__(self):
        self.registered = set()

    def register(self, rank):
        self.registered.add(rank)
        return len(self.registered)

    def ready(self):
        return len(self.registered) >= 2

    def crash(self):
        os._exit(1)


@ray.remote(num_cpus=0.1)
class Trainer:
    def run(self, coord):
        while not ray.get(coord.ready.remote()):
            time.sleep(0.5)
        return "trained"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    coord = Coordinator.remote()
    print(ray.get([coord.register.remote(r) for r in range(2)]))
    try:
        ray.get(coord.crash.remote())
    except ray.exceptions.RayActorError:
        print("coordinator died; Ray restarts it", flush=True)
    trainer = Trainer.remote()
    print("READY: Trainer.run polls Coordinator.ready; registrations were lost in the restart", flush=True)
    print(ray.get(trainer.run.remote(coord)))


if __name__ == "__main__":
    main()
