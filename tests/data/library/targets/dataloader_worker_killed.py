"""Reproduction: a training thread iterates a DataLoader with 2 worker processes; one worker is
SIGKILLed mid-epoch (the OOM killer's way). The parent waits in _try_get_data -> queue.get for a
batch the dead worker will never send (pytorch/pytorch#8976). In a thread other than the main
thread no SIGCHLD handler is installed, so the parent only notices at its next worker-status
check (MP_STATUS_CHECK_INTERVAL, 5 s) and then raises. Prints WORKERS <parent> <w0> <w1>."""

import os
import threading
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowShards(Dataset[torch.Tensor]):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(2.0)  # decode a shard from remote storage
        return torch.full((4,), float(index))


def train() -> None:
    loader = DataLoader(SlowShards(), batch_size=2, num_workers=2, prefetch_factor=1)
    it = iter(loader)
    pids = [w.pid for w in it._workers]  # type: ignore[attr-defined]
    print("WORKERS", os.getpid(), *pids, flush=True)
    for step, batch in enumerate(it):
        print("step", step, batch.sum().item(), flush=True)


if __name__ == "__main__":
    t = threading.Thread(target=train, name="TrainingThread")
    t.start()
    t.join()
