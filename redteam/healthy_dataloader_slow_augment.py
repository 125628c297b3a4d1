"""Healthy: a DataLoader's worker processes run a slow pure-Python augmentation; the trainer waits.

Scenario: a Trainer actor iterates a torch DataLoader(num_workers=2) whose dataset's
`__getitem__` runs a deliberately slow pure-Python augmentation (~25 s a sample, a loop over a
list of floats). The trainer's main thread sits in the DataLoader's `_next_data` (a queue get
with a timeout, polled) for long stretches; its log is silent between batches.

Mechanism: the parent waits on children that are busy (CPU) and whose loop state advances; every
25-50 s a batch arrives and the trainer logs a step. Nothing blocks forever.
Truth: no hang (slow data loading). Must never be called hung; `no-hang` or `inconclusive`
(the workers named as busy) are right.
"""
import os
import time

import ray


@ray.remote(num_cpus=0.1)
class Trainer:
    def train(self, steps: int) -> int:
        import torch
        from torch.utils.data import DataLoader, Dataset

        class SlowAugment(Dataset):
            def __len__(self) -> int:
                return 64

            def __getitem__(self, i: int):
                values = [float(j % 97) for j in range(20000)]
                end = time.time() + 25
                rounds = 0
                while time.time() < end:
                    values = [v * 0.999 + 0.001 for v in values]
                    rounds += 1
                return torch.tensor(values[:8]), rounds

        loader = DataLoader(SlowAugment(), batch_size=1, num_workers=2)
        done = 0
        for x, rounds in loader:
            done += 1
            print(f"step {done}: batch {tuple(x.shape)} after {int(rounds)} rounds", flush=True)
            if done >= steps:
                break
        return done


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    t = Trainer.remote()
    print("READY: trainer with a slow DataLoader (25 s a sample, 2 workers)", flush=True)
    print(ray.get(t.train.remote(16)), flush=True)


if __name__ == "__main__":
    main()
