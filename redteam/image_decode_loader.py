"""Healthy: a trainer's torch DataLoader waits on two worker processes that each take ~5 s to decode a sample.

Scenario: Trainer.epoch iterates a `torch.utils.data.DataLoader(num_workers=2, batch_size=2)`
over a dataset whose `__getitem__` "decodes" an image with seconds of numpy work (repeated FFT
filtering of a 512x512 array). The actor's main thread sits in `DataLoader.__next__` →
`_get_data` → `_try_get_data` → `multiprocessing.Queue.get(timeout=5)` (a queue read, re-tried
every 5 s) while the two forked worker processes (children of the actor, not Ray workers) compute.
A batch arrives every ~5-10 s; the step itself is instant; nothing is logged for ~3 min.

Mechanism (none: healthy): a consumer waits on a queue fed by busy child processes.
Truth: no hang. A right diagnosis says no-hang or inconclusive (it should find the busy
children); a hang (queue-get-wait / producer gone / child-process-hang) is a false hang.
"""
# redteam-settle: 25
import os

import numpy as np
import ray


class SlowDecode:
    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        import torch

        rng = np.random.default_rng(i)
        img = rng.random((512, 512))
        for _ in range(400):
            img = np.real(np.fft.ifft2(np.fft.fft2(img) * 0.99))
        return torch.from_numpy(img[:8, :8].copy())


@ray.remote(num_cpus=1)
class Trainer:
    def epoch(self, n: int) -> float:
        from torch.utils.data import DataLoader

        loader = DataLoader(SlowDecode(n), batch_size=2, num_workers=2)
        total = 0.0
        for batch in loader:
            total += float(batch.sum())
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    t = Trainer.remote()
    ref = t.epoch.remote(64)
    print("READY training", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
