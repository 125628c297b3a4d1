"""Data-parallel groups built from a per-node TP_SIZE that differs between nodes: no collective completes.

Scenario
    A 4-rank tensor/data-parallel trainer (torch.distributed, gloo) builds its data-parallel group
    as ``new_group([r for r in range(world) if r % tp == 0])`` with ``tp`` read from the node's
    ``TP_SIZE``. Ranks 0 and 1 run where TP_SIZE=2, ranks 2 and 3 where it was left at 1. Each
    rank logs its layout once (``rank r: tp=.. dp_group=[..]``), then trains.

Mechanism
    ``new_group`` is called with different member lists on different ranks: ranks 0 and 1 build
    ``[0, 2]``, ranks 2 and 3 build ``[0, 1, 2, 3]``, under the same group name (the group
    counter). Rank 1 is not in its group (torch warns; its all_reduce on it is a no-op) and goes on
    to the world all_reduce of the loss; ranks 0, 2 and 3 wait in all_reduce on the dp group. No
    collective can complete. The driver waits in ray.get.

What misleads
    Every rank is inside all_reduce, and torch's warning names rank 1 ("Running all_reduce on
    global rank 1 which does not belong to the given group"): rank 1 looks like the culprit, but it
    is a symptom of the layout. The member lists are only in the ranks' own log lines.

Expected diagnosis
    ``collective-mismatch``, naming the disagreement: ranks logging ``dp_group=[0, 2]`` and ranks
    logging ``dp_group=[0, 1, 2, 3]`` built one group with two member lists. Fix: one TP_SIZE for
    the whole job (in the job config, not per node); assert the layout is identical on all ranks
    (all_gather it).
"""

import datetime
import os
import tempfile

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "collective-mismatch",
    "culprits": [{"class_name": "ShardedTrainer", "rank": None}],
    "notes": "new_group with [0, 2] on ranks 0, 1 and [0, 1, 2, 3] on ranks 2, 3 (TP_SIZE per node); "
    "the ranks' layout lines name the disagreement.",
}


@ray.remote(num_cpus=0.1)
class ShardedTrainer:
    def setup(self, rank: int, world: int, store: str) -> str:
        import torch.distributed as dist
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=2))
        self.rank, self.world = rank, world
        tp = int(os.environ.get("TP_SIZE", "1"))
        ranks = [r for r in range(world) if r % tp == 0]
        self.dp_group = dist.new_group(ranks)
        print(f"rank {rank}: tp={tp} dp_group={ranks}", flush=True)
        return f"{rank}:{ranks}"

    def _sync_grads(self, grads):
        import torch.distributed as dist
        dist.all_reduce(grads, group=self.dp_group)
        return grads

    def _reduce_loss(self, loss):
        import torch.distributed as dist
        dist.all_reduce(loss)
        return float(loss) / self.world

    def train(self, steps: int) -> float:
        import torch
        loss = 0.0
        for _step in range(steps):
            grads = self._sync_grads(torch.full((1024,), float(self.rank)))
            loss = self._reduce_loss(torch.tensor([grads.mean().item()]))
        return loss


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    store = os.path.join(tempfile.mkdtemp(prefix="tp_store_"), "store")
    env = {"TORCH_GLOO_LAZY_INIT": "1"}
    ranks = [ShardedTrainer.options(runtime_env={"env_vars": {**env, "TP_SIZE": "2" if r < 2 else "1"}}).remote()
             for r in range(4)]
    ray.get([t.setup.remote(r, 4, store) for r, t in enumerate(ranks)])
    refs = [t.train.remote(20) for t in ranks]
    print("READY training on 4 ranks", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
