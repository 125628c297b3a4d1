"""One gloo rank rebuilds its communicator after a caught error; the other stays in all_reduce on the old one.

Scenario: a two-rank data-parallel loop (Ray actors, gloo) keeps its gradient communicator in
`self.group = dist.new_group(ranks)` and has "fault tolerance" copied from a single-rank script: on
an exception in the step it rebuilds the communicator (`self.group = dist.new_group(ranks)`),
expecting a fresh group to clear any broken state. Only rank 1 hits the error (a bad batch on its
shard at step 3), so only rank 1 calls new_group a second time. new_group is a collective over the
world (default use_local_synchronization=False: a store-based barrier on the TCPStore): rank 1 waits
there for rank 0, polling the store; rank 0 is already in step 3's all_reduce on the first group,
waiting for rank 1's contribution (timeout 1 h).
(A first version called destroy_process_group() + init_process_group(port + 1) on rank 1: destroy
closed the gloo pairs and rank 0's all_reduce failed with "Connection closed by peer" — the job
FAILED, no hang; output kept in rt_gloo_rank_reinit_alone.v1_destroy_failed.)

Mechanism: ranks in different collectives after a rank-local recovery: rank 0 in all_reduce of
group #1, rank 1 in the creation (store barrier) of group #2 that rank 0 will never call.
Truth: culprit rank 1 (re-created its communicator alone, in its except clause); rank 0 is the
victim. Fix: a failure must be agreed across ranks (all rebuild together, e.g. torchelastic
restart, or fail the whole job), never rebuild one rank's group.
"""
import datetime
import os
import socket

import ray


@ray.remote(num_cpus=0.5)
class Rank:
    def run(self, rank, world, port, steps):
        import torch
        import torch.distributed as dist

        def init(attempt):
            dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port + attempt}", rank=rank,
                                    world_size=world, timeout=datetime.timedelta(hours=1))

        init(0)
        ranks = list(range(world))
        self.group = dist.new_group(ranks)
        w = torch.zeros(1 << 16)
        for step in range(steps):
            try:
                if rank == 1 and step == 3:
                    raise ValueError("bad batch in shard 1")
                g = torch.ones_like(w) * (rank + 1)
                dist.all_reduce(g, group=self.group)
                w -= 0.01 * g
            except ValueError as e:
                print(f"rank {rank} step {step}: {e}; rebuilding the communicator", flush=True)
                self.group = dist.new_group(ranks)
        return float(w.sum())


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = free_port()
    ranks = [Rank.remote() for _ in range(2)]
    refs = [r.run.remote(i, 2, port, 10) for i, r in enumerate(ranks)]
    print("READY: 2 gloo ranks; rank 1 rebuilds its group (new_group) alone at step 3, rank 0 in all_reduce", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
