"""An inference actor's constructor waits for a checkpoint written under another name.

Scenario
    After each training round, a ``Trainer`` actor saves the policy to
    ``<run_dir>/checkpoint_<round>.pt``; a new ``PolicyServer`` actor is then created for
    evaluation and waits in ``__init__`` until its checkpoint file exists (the save may lag on
    shared storage), then serves ``generate`` calls.

Mechanism
    The evaluation code builds the path as ``ckpt_<round>.pt`` (the name an older trainer used).
    The file never appears, so ``__init__`` polls forever: Ray shows the actor as
    ``PENDING_CREATION`` although its worker process is alive and running the constructor; the
    driver's ``generate`` call waits for an actor that is never created. Nothing is short of
    resources.

What misleads
    The actor is ``PENDING_CREATION`` and its ``generate`` call ``PENDING_NODE_ASSIGNMENT``,
    which reads as "waiting for resources": add nodes, wait for the autoscaler. Wrong: the actor
    has a live pid and its ``__init__`` task is RUNNING - the constructor itself polls for
    ``ckpt_<round>.pt`` while the trainer writes ``checkpoint_<round>.pt``.

Expected diagnosis
    ``poll-never-satisfied`` in ``PolicyServer.__init__`` at the ``time.sleep`` of the wait
    loop; chain driver → PolicyServer (the constructor's process, not a pending resource).
"""

import os
import tempfile
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "poll-never-satisfied",
    "culprits": [{"class_name": "PolicyServer", "rank": None}],
    "notes": "PolicyServer.__init__ polls for ckpt_0.pt; the trainer wrote checkpoint_0.pt. The "
    "actor is PENDING_CREATION with a live process running its constructor.",
}


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, run_dir: str):
        self.run_dir = run_dir

    def save(self, round_: int) -> str:
        path = os.path.join(self.run_dir, f"checkpoint_{round_}.pt")
        with open(path, "w") as f:
            f.write(f"policy weights v{round_}")
        return path


@ray.remote(num_cpus=0.25)
class PolicyServer:
    def __init__(self, checkpoint_path: str, wait_s: float = 0.5):
        while not os.path.exists(checkpoint_path):  # the save may lag on shared storage
            time.sleep(wait_s)
        with open(checkpoint_path) as f:
            self.weights = f.read()

    def generate(self, prompt: str) -> str:
        return f"{prompt} [{self.weights}]"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    run_dir = tempfile.mkdtemp(prefix="actor_init_ckpt_")
    trainer = Trainer.remote(run_dir)
    print(f"saved {ray.get(trainer.save.remote(0))}", flush=True)
    server = PolicyServer.remote(os.path.join(run_dir, "ckpt_0.pt"))
    print("READY: evaluating round 0", flush=True)
    print(ray.get(server.generate.remote("state 0 ->")), flush=True)


if __name__ == "__main__":
    main()
