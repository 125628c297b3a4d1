"""Healthy: an actor waits in ray.get on a call queued behind its target actor's long (finishing) refit.

Scenario: a Featurizer actor (one thread, the default) is asked to `refit()` its PCA basis on new
data: a silent numpy loop of ~7 minutes (power iterations, a counter `it` advancing). Right after,
an Evaluator actor calls `featurizer.transform.remote(batch)` and waits in `ray.get` on it; that
call is queued behind `refit` on the Featurizer's only thread. The driver waits on the Evaluator.
For those minutes: the Evaluator is parked in ray.get, its task `transform` is submitted to an
actor whose running call has not returned, nothing finishes, nothing is logged.
Mechanism (none: healthy): an actor call queued behind a long call that is computing and returns
by itself (the healthy twin of a call queued behind a never-returning loop).
Truth: no hang. A right diagnosis is no-hang or inconclusive; endless-call-holds-actor /
actor-queue-blocked / a hang naming Featurizer or Evaluator is a false hang.
"""
# redteam-settle: 25
import os
import time

import ray


@ray.remote(num_cpus=0.1)
class Featurizer:
    def __init__(self):
        import numpy as np

        self.basis = np.eye(300)[:, :16]

    def refit(self, seconds: float) -> int:
        import numpy as np

        rng = np.random.default_rng(1)
        cov = rng.standard_normal((300, 300))
        cov = cov @ cov.T
        v = rng.standard_normal((300, 16))
        end = time.time() + seconds
        it = 0
        while time.time() < end:
            v, _ = np.linalg.qr(cov @ v)
            it += 1
        self.basis = v
        return it

    def transform(self, batch):
        import numpy as np

        return (np.asarray(batch) @ self.basis).tolist()


@ray.remote(num_cpus=0.1)
class Evaluator:
    def __init__(self, featurizer):
        self.featurizer = featurizer

    def run(self) -> int:
        import numpy as np

        batch = np.ones((4, 300)).tolist()
        feats = ray.get(self.featurizer.transform.remote(batch))
        return len(feats)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    feat = Featurizer.remote()
    ray.get(feat.transform.remote([[0.0] * 300]))
    refit = feat.refit.remote(420.0)
    time.sleep(1.0)
    ev = Evaluator.remote(feat)
    out = ev.run.remote()
    print("READY refitting", flush=True)
    print(ray.get([refit, out]))


if __name__ == "__main__":
    main()
