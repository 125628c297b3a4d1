"""Two pipeline stages both send their boundary tensor first, then receive: gloo's blocking sends meet head to head.

Scenario: a 2-stage pipeline-parallel step (gloo on CPU, Ray actors as stages). Each stage
exchanges a 64 MB boundary tensor with its neighbour: `dist.send(act, dst=peer)` then
`dist.recv(buf, src=peer)`. A gloo send of a large tensor completes only when the peer has posted
the matching recv; both ranks are in send, neither reaches its recv. Both main threads sit in
`send` (distributed_c10d.py) at the same line; no error, no timeout (an hour).

Mechanism: a point-to-point ordering deadlock: each rank's blocking send waits for a recv the
other rank would post only after its own send returns (a wait-for cycle of two ranks).
Truth: culprit the exchange order in Stage.exchange, shared by both ranks (a right diagnosis
names both ranks waiting on each other in send; neither is a victim of a third party and no rank
skipped a collective). Fix: dist.batch_isend_irecv / isend+irecv then wait, or order by rank
parity (even ranks send first, odd ranks receive first).
"""
import datetime
import os
import tempfile

import ray


@ray.remote(num_cpus=0.5)
class Stage:
    def __init__(self, rank: int, world: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank, self.peer = rank, 1 - rank

    def exchange(self, step: int) -> float:
        import torch
        import torch.distributed as dist

        act = torch.full((16 << 20,), float(step + self.rank))
        buf = torch.empty_like(act)
        dist.send(act, dst=self.peer)
        dist.recv(buf, src=self.peer)
        return float(buf[0])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="pipe_"), "store")
    stages = [Stage.remote(r, 2, path) for r in range(2)]
    refs = [s.exchange.remote(0) for s in stages]
    print("READY exchanging", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
