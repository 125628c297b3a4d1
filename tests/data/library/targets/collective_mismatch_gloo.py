"""Reproduction: two gloo ranks (FileStore, GLOO_SOCKET_IFNAME=lo) enter different collectives.
Mode `lightning`: rank 0 logged a metric key that rank 1 did not, so at the epoch end rank 0's
metric sync calls broadcast while rank 1 is already in the next all_reduce
(Lightning-AI/pytorch-lightning#19106). Modes `accelerate` / `coalesced`: rank 0 gathers its eval
predictions with all_gather_into_tensor (accelerate's gather) / all_gather_coalesced, while rank 1
had no eval batch left and waits in barrier (wait_for_everyone) (huggingface/accelerate#2785).
Prints RANK <r> <pid>."""

import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def sync_metric(value: torch.Tensor) -> torch.Tensor:  # like lightning's _sync_ddp
    dist.broadcast(value, src=0)
    return value


def gather_predictions(preds: torch.Tensor) -> torch.Tensor:  # like accelerate's _gpu_gather
    out = torch.empty(preds.numel() * dist.get_world_size())
    dist.all_gather_into_tensor(out, preds)
    return out


def gather_list(preds: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    outs = [[torch.empty_like(p) for p in preds] for _ in range(dist.get_world_size())]
    dist.all_gather_coalesced(outs, preds)
    return outs


def rank_main(rank: int, store_path: str, mode: str) -> None:
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=2)
    print("RANK", rank, os.getpid(), flush=True)
    dist.all_reduce(torch.ones(1))  # one step in step
    if mode == "lightning":
        if rank == 0:
            sync_metric(torch.tensor([0.5]))  # val/extra_metric: logged on rank 0 only
        dist.all_reduce(torch.ones(3))
    elif rank == 0:  # rank 1 had no eval batch left and went straight to wait_for_everyone()
        if mode == "accelerate":
            gather_predictions(torch.ones(4))
        else:
            gather_list([torch.ones(2), torch.ones(3)])
    else:
        dist.barrier()
    time.sleep(600)


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "lightning"
    path = os.path.join(tempfile.mkdtemp(), "store")
    mp.spawn(rank_main, args=(path, mode), nprocs=2, join=True)
