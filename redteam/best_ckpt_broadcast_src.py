"""Two gloo ranks broadcast the "best" weights, each choosing itself as src from its local validation loss.

Scenario: after each epoch the ranks evaluate on their own validation shard and the best model is
broadcast to all ranks: `src = 0 if my_loss <= peer_loss_guess else 1` — but each rank only knows its
own loss (the all_gather of losses was removed "to save a collective"), and assumes the peer's loss is
the previous epoch's global best. Epoch 0 both agree (src 0); in epoch 1 rank 0 and rank 1 each see
their own loss beat the remembered best, so both call `dist.broadcast(w, src=rank)` on a 64 MB tensor.
Mechanism: both ranks are roots of the same broadcast (same sequence number): each sends, nobody posts
the receive; both block in the gloo broadcast's send wait, idle. The driver in ray.get on both epochs.
Truth: culprit both ranks' src choice (rank-local decision for a collective's root); fix: all_gather
the losses (or all_reduce MIN + argmin) so every rank picks the same src.
"""
import os
import tempfile

import ray


@ray.remote(num_cpus=1)
class Rank:
    def __init__(self, rank, world, store_path):
        import torch
        import torch.distributed as dist
        self.rank = rank
        dist.init_process_group("gloo", init_method=f"file://{store_path}", rank=rank, world_size=world)
        self.w = torch.full((16 * 1024 * 1024,), float(rank))
        self.best = 1.0

    def epoch(self, e):
        import torch.distributed as dist
        my_loss = 0.9 - 0.1 * e - 0.01 * self.rank * e  # each rank's own validation shard
        src = self.rank if (e > 0 and my_loss < self.best) else 0
        print(f"epoch {e} rank {self.rank}: loss {my_loss:.3f} best {self.best:.3f} -> broadcast src {src}",
              flush=True)
        dist.broadcast(self.w, src=src)
        self.best = min(self.best, my_loss)
        print(f"epoch {e} rank {self.rank}: weights synced", flush=True)
        return src


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    store = os.path.join(tempfile.mkdtemp(), "store")
    env = {"env_vars": {"GLOO_SOCKET_IFNAME": "lo"}}
    ranks = [Rank.options(runtime_env=env).remote(r, 2, store) for r in range(2)]
    print("epoch 0:", ray.get([r.epoch.remote(0) for r in ranks]), flush=True)
    refs = [r.epoch.remote(1) for r in ranks]
    print("READY: driver -> both ranks in broadcast, each with itself as src", flush=True)
    print("epoch 1:", ray.get(refs))


if __name__ == "__main__":
    main()
