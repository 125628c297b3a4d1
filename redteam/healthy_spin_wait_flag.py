"""Healthy: a thread spins on a flag (no sleep, 100 % CPU) that a worker thread sets after minutes of numpy work.

Scenario: a Calibrator actor starts a `fit` thread that runs numpy matrix products for ~5 minutes
(GIL released in BLAS, its `round` counter advancing) and then sets `self.done = True`. The
`calibrate` call waits for it with a hot spin, `while not self.done: pass`: it burns a CPU and its
stack never moves, like a loop that never ends.

Mechanism (none: healthy): a busy spin on an attribute that another live thread of the same process,
seen computing and advancing, will set (the healthy twin of a spin on a flag nothing sets).
Truth: no hang. A right diagnosis is no-hang or inconclusive (the spin is wasteful, not stuck); busy-loop
hang naming Calibrator's spin is a false hang.
"""
# redteam-settle: 25
import os
import threading

import numpy as np
import ray


@ray.remote(num_cpus=1, max_concurrency=2)
class Calibrator:
    def __init__(self, rounds: int):
        self.done = False
        self.rounds = rounds
        self.loss = 0.0
        threading.Thread(target=self._fit, name="fit", daemon=True).start()

    def _fit(self) -> None:
        rng = np.random.default_rng(0)
        a = rng.standard_normal((400, 400))
        for round_ in range(self.rounds):
            b = a @ a.T
            self.loss = float(b[0, 0]) / (round_ + 1)
        self.done = True

    def calibrate(self) -> float:
        while not self.done:
            pass
        return self.loss


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cal = Calibrator.remote(60_000)
    ref = cal.calibrate.remote()
    print("READY calibrating", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
