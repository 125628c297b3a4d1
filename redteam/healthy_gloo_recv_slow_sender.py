"""Healthy: a pipeline stage waits in a gloo recv for minutes while its upstream stage computes the activation.

Scenario: a 2-stage pipeline on gloo. Stage 0 computes each micro-batch's activation with a few
minutes of torch matmuls (a deep, CPU-only forward), then `dist.send`s it; stage 1 sits in
`dist.recv(src=0)` meanwhile — one frame, no log line, no finished task for minutes. Every
micro-batch arrives: stage 0 is busy (90 %+ CPU, its stack in matmul/its forward loop) and will
send. The driver waits in ray.get.

Mechanism: a recv whose only sender is alive and computing the tensor it will send.
Truth: healthy (no hang); the step finishes after ~3 × the forward time. A right answer is
no-hang, or inconclusive naming stage 0's computation; "hang" is a false hang.
"""
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
class Stage:
    def __init__(self, rank, path):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def _forward(self, seconds):
        import torch

        torch.set_num_threads(1)
        x = torch.randn(384, 384)
        w = torch.randn(384, 384) / 20
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            x = torch.tanh(x @ w)
        return x.flatten()[:4096].clone()

    def run(self, n_micro, seconds):
        import torch
        import torch.distributed as dist

        out = []
        for _ in range(n_micro):
            if self.rank == 0:
                dist.send(self._forward(seconds), dst=1)
            else:
                buf = torch.empty(4096)
                dist.recv(buf, src=0)
                out.append(float(buf.sum()))
        return len(out)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt10_recv_"), "store")
    stages = [Stage.remote(r, path) for r in range(2)]
    refs = [s.run.remote(3, 240) for s in stages]
    print("READY: driver -> Stage.run x2 (stage 1 in recv while stage 0 computes ~4 min per micro-batch)", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
