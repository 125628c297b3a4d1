"""Ray Tune: a trial waits on a shared simulator actor that another trial left running a loop.

Scenario
    A small hyper-parameter sweep (``tune.Tuner``, two learning rates) over an RL agent. The
    environment simulator is expensive to start, so one named ``Simulator`` actor is shared by
    all trials. The sweep's first trial starts the simulator's background stepping loop
    (``sim.run.remote()``, fire-and-forget); every trial reads observations with
    ``ray.get(sim.step.remote())``.

Mechanism
    ``Simulator`` is a plain actor (``max_concurrency=1``) and ``run()`` loops until ``stop()``
    is called. The first trial starts ``run()`` and finishes early (its config converges at
    once); from then on ``run()`` holds the actor's only slot, so the second trial's ``step()``
    calls are queued behind it forever (``SUBMITTED_TO_WORKER``), and so would be ``stop()``.
    The trial's own thread waits in ``ray.get``; Tune's main thread in the trial actor waits on
    its results queue; the driver waits in ``tuner.fit()``.

What misleads
    The trial's main thread waits on Tune's results queue, which points at Tune; the Simulator
    is busy in ``run()``, which looks like work. Wrong: the main thread is the library waiting
    on the training thread, which is in ``ray.get`` on ``Simulator.step``, queued behind a
    ``run()`` loop another trial started and never stopped.

Expected diagnosis
    ``poll-never-satisfied``: Simulator in ``run()`` at its ``time.sleep`` (a loop whose exit
    never comes). Chain: driver → the trial (its training thread in ``ray.get``, not Tune's
    main thread) → Simulator.
"""

import os
import tempfile
import time

import ray
from ray import tune

EXPECTED = {
    "verdict": "hang",
    "pattern": "poll-never-satisfied",
    "culprits": [{"class_name": "Simulator", "rank": None}],
    "notes": "the first trial started Simulator.run() (loops until stop()) and finished; the second "
    "trial's step() calls are queued behind run() on the max_concurrency=1 actor.",
    "ready": "trial lr=0.01 waiting for observations",
    "needs": ["ray.tune"],  # pip install "debug-hang[train]" (or "ray[tune]")
}


@ray.remote(num_cpus=0.25)
class Simulator:
    def __init__(self):
        self.stopped, self.t = False, 0

    def run(self) -> int:
        while not self.stopped:
            self.t += 1
            time.sleep(0.1)
        return self.t

    def step(self) -> int:
        return self.t

    def stop(self) -> None:
        self.stopped = True


def trainable(config: dict) -> None:
    sim = ray.get_actor("simulator", namespace="tune_sim")
    if config["lr"] >= 0.1:  # the first trial of the sweep
        sim.run.remote()  # start the background stepping loop for everyone
        tune.report({"score": 1.0})  # converged at once
        return
    time.sleep(2.0)
    print("trial lr=0.01 waiting for observations", flush=True)
    for _ in range(3):
        tune.report({"score": float(ray.get(sim.step.remote()))})


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    sim = Simulator.options(name="simulator", namespace="tune_sim").remote()
    ray.get(sim.step.remote())
    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": 0.25}),
        param_space={"lr": tune.grid_search([0.1, 0.01])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=tempfile.mkdtemp(prefix="tune_sim_"), name="sweep"),
    )
    print("starting the sweep", flush=True)
    print(tuner.fit().get_dataframe(), flush=True)


if __name__ == "__main__":
    main()
