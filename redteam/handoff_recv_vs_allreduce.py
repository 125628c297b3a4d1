"""Rank 0 skips its overflow hand-off when it has nothing to send; rank 1 always waits in recv for it while rank 0 is in all_reduce.

Scenario: two data-parallel ranks (Ray actors, gloo). Rank 0's loader sometimes produces more
samples than its batch; each step it hands the overflow to rank 1 point to point *if it has any*:
`if self.overflow: dist.send(count); dist.send(rows)`. Rank 1 always receives the count first
(`dist.recv(count, src=0)`), then the rows. For the first steps rank 0 has overflow; at step 3 its
shard divides evenly and the overflow is empty, so rank 0 skips the send and goes on to the gradient
`dist.all_reduce`, while rank 1 waits in `dist.recv`. A p2p receive and a collective never pair;
both wait for the 1 h timeout. Nothing is logged after step 2.

Mechanism: the ranks issue different operations (p2p recv on one, all_reduce on the other) because
of a data-dependent branch on one rank: a collective/p2p mismatch.
Truth: hang; culprit rank 0's skipped send (`if self.overflow:` in `step`; the protocol needs a count
every step, 0 included); rank 1's `dist.recv(count, src=0)` is the waiter. Fix: always send the count
(possibly 0) and branch on the received value on both ranks. collective-mismatch naming both ranks is
right; a hang naming only rank 1 as the cause is a victim named.
"""
import datetime
import os
import socket

import ray


@ray.remote(num_cpus=0.1)
class Rank:
    def __init__(self, rank: int, world: int, port: int) -> None:
        self.rank, self.world, self.port = rank, world, port
        self.overflow: list[float] = []

    def setup(self) -> None:
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(self.port), GLOO_SOCKET_IFNAME="lo")
        dist.init_process_group("gloo", rank=self.rank, world_size=self.world,
                                timeout=datetime.timedelta(hours=1))

    def step(self, step: int) -> float:
        import torch
        import torch.distributed as dist

        if self.rank == 0:
            shard = 64 + (8 if step < 3 else 0)  # the loader's yield per step
            self.overflow = [float(i) for i in range(shard - 64)]
            if self.overflow:
                dist.send(torch.tensor([len(self.overflow)]), dst=1)
                dist.send(torch.tensor(self.overflow), dst=1)
        else:
            count = torch.zeros(1, dtype=torch.int64)
            dist.recv(count, src=0)
            rows = torch.zeros(int(count.item()))
            dist.recv(rows, src=0)
        grad = torch.full((1024,), float(step + self.rank))
        dist.all_reduce(grad)
        return float(grad[0])

    def train(self, steps: int) -> float:
        out = 0.0
        for s in range(steps):
            out = self.step(s)
            print(f"rank {self.rank} step {s} done", flush=True)
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    port = free_port()
    ranks = [Rank.remote(r, 2, port) for r in range(2)]
    ray.get([r.setup.remote() for r in ranks])
    refs = [r.train.remote(10) for r in ranks]
    print("READY: 2 gloo ranks training", flush=True)
    print(ray.get(refs), flush=True)


if __name__ == "__main__":
    main()
