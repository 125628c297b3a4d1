"""gloo: ranks 0,1 call barrier() on a subgroup [0,1] but rank 1 calls barrier on the WORLD group.

Mechanism: 3 Ray actors form a gloo world of 3. eval_group = new_group([0,1]). Rank 0 does
dist.barrier(group=eval_group); rank 1, by a bug, dist.barrier() (world); rank 2 dist.barrier()
(world). Rank 0 waits for rank 1 in the subgroup; ranks 1,2 wait for rank 0 in the world group.
Truth: mismatch; culprit rank 1 (called the wrong group) — or at least rank-level mismatch.
"""
import os
import socket

import ray


@ray.remote(num_cpus=0.1)
class Rank:
    def run(self, rank, world, port):
        import datetime

        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(hours=1))
        eval_group = dist.new_group([0, 1])
        if rank == 0:
            dist.barrier(group=eval_group)
        else:
            dist.barrier()
        return rank

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = free_port()
    ranks = [Rank.remote() for _ in range(3)]
    refs = [r.run.remote(i, 3, port) for i, r in enumerate(ranks)]
    print("READY: 3 gloo ranks; rank0 barrier(subgroup [0,1]), ranks 1,2 barrier(world)", flush=True)
    print(ray.get(refs))

if __name__ == "__main__":
    main()
