"""Only the rank that holds validation data creates the eval subgroup: new_group is a collective of the world.

Scenario: two data-parallel ranks on gloo. After the training step, the code builds an "eval
group" for the ranks that own a validation shard: `if self.has_val: self.eval_pg = dist.new_group([0, 1])`.
Only rank 0 owns a shard (the split gave rank 1 none), so rank 1 skips the call and goes on to the
next step's gradient all_reduce on the WORLD group. Rank 0 sits inside new_group (gloo's
connect of the new group, a store wait on rank 1's address for the new group's prefix); rank 1 sits
in all_reduce waiting for rank 0.

Mechanism: a group-creation call (dist.new_group, itself collective over every rank of the default
group) made under a rank-dependent branch: the ranks are in different collectives.
Truth: hang; culprit rank 0's conditional `dist.new_group` in Ranker.step (the call only one rank
makes) with rank 1's all_reduce the other half of the mismatch. Fix: every rank calls
`new_group([...])` unconditionally (those not in it too), then branch on membership.
"""
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
class Ranker:
    def __init__(self, rank, path, has_val):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank, self.has_val, self.eval_pg = rank, has_val, None

    def ready(self):
        return self.rank

    def step(self, n):
        import torch
        import torch.distributed as dist

        grad = torch.ones(1024)
        for i in range(n):
            dist.all_reduce(grad)
            if i == 1 and self.has_val:
                self.eval_pg = dist.new_group([0, 1])
        return float(grad[0])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt11_ng_"), "store")
    ranks = [Ranker.remote(r, path, has_val=(r == 0)) for r in range(2)]
    ray.get([r.ready.remote() for r in ranks])
    refs = [r.step.remote(5) for r in ranks]
    time.sleep(6)
    print("READY: Ranker.step x2 (rank 0 in new_group, rank 1 in all_reduce)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
