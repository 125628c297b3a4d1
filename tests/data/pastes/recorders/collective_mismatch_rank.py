"""One rank of collective_mismatch.py: a few matching all_reduces, then rank 0 broadcasts while
rank 1 all-reduces. Usage: python collective_mismatch_rank.py RANK STORE_PATH STEPS"""

import sys

import torch
import torch.distributed as dist


def sync_step(t: torch.Tensor) -> None:
    dist.all_reduce(t)


def share_weights(t: torch.Tensor, rank: int) -> None:
    if rank == 0:
        dist.broadcast(t, src=0)  # rank 0 only: the other rank is in all_reduce
    else:
        sync_step(t)


def main() -> None:
    rank, store_path, steps = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
    t = torch.ones(4)
    for _ in range(steps):
        sync_step(t)
    share_weights(t, rank)


if __name__ == "__main__":
    main()
