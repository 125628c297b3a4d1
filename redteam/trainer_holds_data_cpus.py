"""A trainer actor holds the CPUs its own Ray Data pipeline's actor pool needs: the pool's actor never starts.

Scenario: a Trainer actor (num_cpus=3, "one for the step, two for the dataloader") iterates a
dataset built inside it: `ray.data.range(...).map_batches(Featurizer, concurrency=1, num_cpus=2)`
(the Featurizer was tuned on a bigger node). The cluster has 4 CPUs: the Trainer holds 3, the
Featurizer actor needs 2 and stays PENDING_CREATION (pending demand {CPU: 2}); Ray Data's actor
pool never gets a running actor, so no batch is ever produced. The Trainer waits in
`iter_batches`; the driver waits in `ray.get(trainer.fit)`.

Mechanism: hold-and-wait through Ray Data: the consumer of a dataset holds the resources the
dataset's operator (an actor-pool map) needs to start.
Truth: culprit the Trainer actor (its 3-CPU reservation, held while it waits on the pipeline);
the pending Featurizer actor is the starved demand. Fix: give the Trainer num_cpus=1 (or the
Featurizer num_cpus=1); not "kill an idle actor".
"""
# redteam-settle: 15
import os

import numpy as np
import ray


class Featurizer:
    def __init__(self):
        self.w = np.random.default_rng(0).random((1, 16))

    def __call__(self, batch: dict) -> dict:
        batch["x"] = batch["id"].reshape(-1, 1) * self.w
        return batch


@ray.remote(num_cpus=3)
class Trainer:
    def fit(self, rows: int) -> float:
        ds = ray.data.range(rows).map_batches(Featurizer, concurrency=1, num_cpus=2, batch_size=256)
        loss = 0.0
        for batch in ds.iter_batches(batch_size=256):
            loss += float(np.asarray(batch["x"]).mean())
        return loss


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainer = Trainer.remote()
    ref = trainer.fit.remote(20000)
    print("READY training", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
