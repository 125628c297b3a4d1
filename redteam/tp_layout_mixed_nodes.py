"""Data-parallel groups built from a per-node TP_SIZE that differs between nodes: every rank in all_reduce, no group completes.

Scenario: a 4-rank tensor/data-parallel trainer (torch.distributed, gloo, lazy gloo init to speed
up start-up) builds its data-parallel group as `new_group([r for r in range(world) if r % tp == 0])`
with tp read from the node's TP_SIZE. The first node pool (ranks 0, 1) is configured TP_SIZE=2,
the second (ranks 2, 3) was left at TP_SIZE=1. So rank 0 gets group [0, 2], rank 1 is not in
its group (all_reduce on it is a no-op) and goes on to the world all_reduce of the loss, ranks 2
and 3 get [0, 1, 2, 3] -- all under the same group name (the group counter). Each rank logs its
layout once ("rank r: tp=.. dp_group=[..]"), then ranks 0, 2, 3 wait in all_reduce on the
dp group and rank 1 in all_reduce on the world group. The driver waits in ray.get.

Mechanism: collective mismatch by process groups created with different ranks on different
ranks (new_group called with different member lists); all ranks are in all_reduce, no rank is
elsewhere, and none of the collectives can complete.
Truth: culprit the configuration of ranks 2 and 3 (TP_SIZE=1 vs 2; their dp group [0,1,2,3]
differs from rank 0's [0,2]); the log lines show it. Verdict hang, pattern collective-mismatch
(or equivalent), naming the differing groups. Fix: one TP_SIZE for the whole job (pass it in
the job config, not per node), assert the layout is identical on all ranks (all_gather it).
"""
import datetime
import os
import tempfile

import ray


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
