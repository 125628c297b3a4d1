"""One rank of a 2-rank gloo job started by torchrun (CPU), hung or failed on purpose.

  skip       rank 1 leaves the loop one all_reduce early and sleeps; rank 0 waits in all_reduce.
             Both ranks armed faulthandler.dump_traceback_later, so each prints its threads.
  mismatch   TORCH_DISTRIBUTED_DEBUG=DETAIL: rank 0 broadcasts while rank 1 all-reduces (step 3)
  timeout    process group timeout 8 s; rank 1 skips the last all_reduce: rank 0's wait times out
  monitored  rank 1 sleeps; rank 0 waits in monitored_barrier(timeout=6 s), which names rank 1

Usage: torchrun --nproc-per-node 2 ... torch_ranks.py MODE
"""

from __future__ import annotations

import datetime
import faulthandler
import os
import sys
import time

import torch
import torch.distributed as dist


def train_step(t: torch.Tensor) -> None:
    dist.all_reduce(t)


def sync_weights(t: torch.Tensor, rank: int) -> None:
    if rank == 0:
        dist.broadcast(t, src=0)
    else:
        train_step(t)


def main() -> None:
    mode = sys.argv[1]
    rank = int(os.environ["RANK"])
    timeout = datetime.timedelta(seconds=8 if mode == "timeout" else 120)
    dist.init_process_group("gloo", timeout=timeout)
    t = torch.ones(8)
    if mode == "skip":
        faulthandler.dump_traceback_later(6, exit=False)
        for step in range(5):
            if rank == 1 and step == 3:
                time.sleep(600)   # the data for this step never came: no all_reduce
            train_step(t)
    elif mode == "mismatch":
        for _ in range(3):
            train_step(t)
        sync_weights(t, rank)
    elif mode == "timeout":
        for step in range(4):
            if rank == 1 and step == 3:
                time.sleep(600)
            train_step(t)
    elif mode == "monitored":
        if rank == 1:
            time.sleep(600)
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=6), wait_all_ranks=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
