"""Healthy: a Ray Data actor-pool UDF builds its model for minutes in __init__ while the consumer waits in iter_batches.

Scenario: an embedding eval pipeline. `map_batches(Embedder, concurrency=1)`: Embedder's
constructor builds a random-projection "model" — 12,000 orthogonalisations (numpy QR of 300x300
matrices), 4-30 minutes on this shared machine depending on its load, silent, CPU-busy. Only then
does it embed batches (fast). The driver waits in `iter_batches` for the first batch the whole
time; Ray Data's progress shows 0 rows out and one actor starting.

Mechanism (none: healthy): a slow actor-pool start-up, the UDF actor's constructor computing.
Truth: no hang (the first batch comes when the model is built, then the job finishes in seconds).
A right diagnosis is no-hang or inconclusive; a hang naming the Embedder or the driver is a false
hang.
"""
# redteam-settle: 25
import os

import numpy as np
import ray


class Embedder:
    def __init__(self, rounds: int = 12000):
        rng = np.random.default_rng(0)
        basis = np.eye(300)
        for i in range(rounds):
            q, _ = np.linalg.qr(basis @ rng.random((300, 300)))
            basis = q
            self.built = i
        self.proj = basis[:, :32]

    def __call__(self, batch: dict) -> dict:
        x = np.repeat(batch["id"].reshape(-1, 1).astype(float), 300, axis=1)
        batch["emb"] = list(x @ self.proj)
        return batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ds = ray.data.range(4000).map_batches(Embedder, concurrency=1, batch_size=500, num_cpus=1)
    print("READY embedding eval set", flush=True)
    n = 0
    for batch in ds.iter_batches(batch_size=500):
        n += len(batch["id"])
    print("embedded", n)


if __name__ == "__main__":
    main()
