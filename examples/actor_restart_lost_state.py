"""A restarted coordinator actor lost its registrations; the trainer polls it forever.

Scenario
    Two workers register with a ``Coordinator`` actor (``max_restarts=1``) that keeps the
    registrations in memory. Its process then dies (``os._exit``, standing in for an OOM kill)
    and Ray restarts it. A ``Trainer`` polls ``ray.get(coord.ready.remote())`` every 0.5 s until
    both workers are registered; the driver waits on ``Trainer.run``.

Mechanism
    The restart ran ``Coordinator.__init__`` again: the set of registrations is empty. The
    workers registered already and never will again, so ``ready()`` answers False to every
    round of the poll. Nothing else calls the coordinator: nothing alive can change the answer.

What misleads
    Calls keep finishing: one ``Coordinator.ready`` every 0.5 s, FINISHED in the State API, so
    the job looks like it makes progress. Each is the same question asked again from a loop that
    stays at its line, not work. The coordinator is ALIVE and idle; its restart shows only as
    ``num_restarts: 1`` in its actor row.

Expected diagnosis
    ``actor-restart-lost-state``: culprit the Coordinator (restarted once, no call but the
    poll's rounds since); the Trainer and the driver wait on it. Fix: persist or replay the
    registrations on restart (or have workers re-register), bound the poll.
"""

import os
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "actor-restart-lost-state",
    "culprits": [{"class_name": "Coordinator", "rank": None}],
    "notes": "Coordinator restarted (num_restarts 1) and lost its registrations; Trainer.run polls "
    "Coordinator.ready forever; the finished ready() rounds are a poll, not progress.",
}


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
    def started(self):
        return True

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
    ray.get(trainer.started.remote())  # created and placed before the wait begins (a loaded node is slow to)
    done = trainer.run.remote(coord)
    time.sleep(2.0)  # a few rounds of the poll
    print("READY: Trainer.run polls Coordinator.ready; registrations were lost in the restart", flush=True)
    print(ray.get(done))


if __name__ == "__main__":
    main()
