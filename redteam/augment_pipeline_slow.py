"""Ray Data image-augmentation pipeline whose UDF is slow; the training loop consumes silently.

Scenario: a trainer streams 96 batches of synthetic images through ds.map_batches(Augment,
concurrency=2) -- a callable class doing per-image blur/rotation in numpy, ~4-6 s per batch of 32
on this machine -- and consumes them with iter_batches(), accumulating statistics without
printing anything until the end (~5 min).

Mechanism: none -- a healthy, slow Ray Data pipeline: the two MapBatches(Augment) actors are
busy (moving stacks), the driver waits in iter_batches for the next block; Ray Data's own
housekeeping actors make periodic calls; a block finishes every few seconds.
Truth: NOT hung. Expected no-hang or inconclusive, never hang.
"""
# redteam-settle: 25
import os

import numpy as np
import ray


class Augment:
    def __init__(self):
        self.rng = np.random.default_rng(0)

    def _blur(self, img: np.ndarray) -> np.ndarray:
        out = img.copy()
        for _ in range(100):
            out = (out + np.roll(out, 1, 0) + np.roll(out, -1, 0) + np.roll(out, 1, 1) + np.roll(out, -1, 1)) / 5
        return out

    def __call__(self, batch: dict) -> dict:
        imgs = []
        for seed in batch["id"]:
            img = np.random.default_rng(int(seed)).random((192, 192, 3))
            img = self._blur(img)
            imgs.append(np.rot90(img, k=int(self.rng.integers(4))))
        return {"image": np.stack(imgs), "id": batch["id"]}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    ds = ray.data.range(96 * 32, override_num_blocks=96).map_batches(Augment, batch_size=32, concurrency=2,
                                                                      num_cpus=1)
    print("READY training on augmented stream", flush=True)
    mean, n = 0.0, 0
    for batch in ds.iter_batches(batch_size=32):
        mean += float(batch["image"].mean())
        n += 1
    print(f"epoch done: {n} batches, mean {mean / max(n, 1):.4f}")


if __name__ == "__main__":
    main()
