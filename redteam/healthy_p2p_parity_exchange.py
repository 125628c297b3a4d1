"""Two pipeline stages exchange 64 MB boundary tensors for four minutes, ordered by rank parity (healthy).

Scenario: the fixed form of pipeline_stage_exchange: rank 0 sends then receives, rank 1 receives
then sends, 64 MB each way per step, back to back, silent (no log line per step). Every sample
finds both ranks inside a blocking `send` or `recv` of gloo, the one in send while its peer is in
the matching recv.

Truth: not hung (a transfer in progress every time; bytes move on the ranks' connection). Written
by h-peers as the counterfactual of the head-to-head rule: a send whose peer is in the matching
recv is no wait on each other.
"""
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
class Stage:
    def __init__(self, rank: int, world: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(hours=1))
        self.rank, self.peer = rank, 1 - rank

    def exchange(self, seconds: float) -> int:
        import torch
        import torch.distributed as dist

        act = torch.full((16 << 20,), float(self.rank))
        buf = torch.empty_like(act)
        steps, end = 0, time.time() + seconds
        while time.time() < end:
            if self.rank % 2 == 0:
                dist.send(act, dst=self.peer)
                dist.recv(buf, src=self.peer)
            else:
                dist.recv(buf, src=self.peer)
                dist.send(act, dst=self.peer)
            steps += 1
        return steps


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="pipe_ok_"), "store")
    stages = [Stage.remote(r, 2, path) for r in range(2)]
    refs = [s.exchange.remote(240.0) for s in stages]
    print("READY exchanging", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
