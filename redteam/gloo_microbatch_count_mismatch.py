"""Two pipeline stages disagree on the number of micro-batches: the last stage waits in recv for one that is never sent.

Scenario: a 2-stage pipeline-parallel step on gloo. Each stage computes its micro-batch count
from its own view of the data: stage 0 from the batch it holds (`len(batch) // mb`, 7 with the
ragged last batch), stage 1 from the configured global batch size (`ceil(global_bs / mb)`, 8).
Stage 0 sends 7 activations (`dist.send`) and goes on to the gradient `dist.barrier()` of the
step; stage 1 received 7 and waits in `dist.recv(src=0)` for an 8th. No error, no timeout
(an hour).

Mechanism: a point-to-point count mismatch: a recv with no matching send, its peer already in
the next collective (barrier) that the receiver will reach only after the recv.
Truth: culprit the micro-batch count (stage 1's `ceil(global_bs / mb)` vs stage 0's
`len(batch) // mb`; stage 1 in recv, line of the 8th recv); stage 0 in barrier is its victim.
Fix: derive the count once and send it (or broadcast it) to every stage; drop the ragged batch.
"""
import datetime
import math
import os
import tempfile

import ray

GLOBAL_BS, MB = 64, 8


@ray.remote(num_cpus=0.5)
class Stage:
    def __init__(self, rank, path):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def step(self, batch_rows):
        import torch
        import torch.distributed as dist

        if self.rank == 0:
            n_micro = batch_rows // MB                # 60 rows -> 7
            for i in range(n_micro):
                dist.send(torch.full((MB, 256), float(i)), dst=1)
            print(f"stage 0: sent {n_micro} micro-batches, gradient barrier", flush=True)
        else:
            n_micro = math.ceil(GLOBAL_BS / MB)       # 8
            buf = torch.empty(MB, 256)
            for i in range(n_micro):
                dist.recv(buf, src=0)
                print(f"stage 1: micro-batch {i} received", flush=True)
        dist.barrier()
        return n_micro


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt10_mb_"), "store")
    stages = [Stage.remote(r, path) for r in range(2)]
    refs = [s.step.remote(60) for s in stages]
    print("READY: driver -> Stage.step x2 (stage 0 sends 7 micro-batches, stage 1 receives 8)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
