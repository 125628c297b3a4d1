"""One rank resumes from a stale local checkpoint and runs fewer steps; only its start-up log line says so.

Scenario: a 3-rank DDP-style trainer (gloo). At start each rank looks for a local checkpoint in
its node-local cache; rank 1's cache still holds one from an earlier run (step 6 of 10), so it
logs "rank 1: resumed from /tmp/.../ckpt-rank1.pt at step 6" and runs steps 6..9 while ranks 0
and 2 log "rank r: no local checkpoint, starting at step 0" and run 0..9. Every step all-reduces
the gradients (gloo pairs collectives by call order), then at the end every rank enters
dist.barrier() before saving. Rank 1 reaches the barrier after 4 all_reduces, the others wait
in their 5th all_reduce. No per-step logging.

Mechanism: a rank that took another code path that only a log line shows (resume vs fresh
start): two ranks in all_reduce, one in barrier, no error anywhere.
Truth: culprit rank 1 (resumed from its own stale checkpoint; the others did not): the log line
"resumed from ... at step 6" is the decisive evidence. Fix: agree on the resume step across ranks
(broadcast rank 0's step / use a shared checkpoint), never a per-node cache.
"""
import datetime
import os
import tempfile

import ray


@ray.remote(num_cpus=0.1)
class DDPWorker:
    def __init__(self, rank: int, world: int, store: str, cache: str):
        import torch.distributed as dist
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=2))
        self.rank, self.cache = rank, cache

    def _resume_step(self) -> int:
        path = os.path.join(self.cache, f"ckpt-rank{self.rank}.pt")
        if os.path.exists(path):
            with open(path) as fh:
                step = int(fh.read())
            print(f"rank {self.rank}: resumed from {path} at step {step}", flush=True)
            return step
        print(f"rank {self.rank}: no local checkpoint, starting at step 0", flush=True)
        return 0

    def fit(self, total: int) -> int:
        import torch
        import torch.distributed as dist
        w = torch.zeros(256)
        for step in range(self._resume_step(), total):
            grad = torch.full((256,), 0.01 * (step + 1))
            dist.all_reduce(grad)
            w -= 0.1 * grad
        dist.barrier()
        return int(w.abs().sum())


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = os.path.join(tempfile.mkdtemp(prefix="ddp_store_"), "store")
    cache = tempfile.mkdtemp(prefix="node_cache_")
    with open(os.path.join(cache, "ckpt-rank1.pt"), "w") as fh:
        fh.write("6")  # left by an earlier, interrupted run on rank 1's node
    workers = [DDPWorker.remote(r, 3, store, cache) for r in range(3)]
    refs = [w.fit.remote(10) for w in workers]
    print("READY 3 ranks fitting", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
