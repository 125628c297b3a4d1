"""Two gloo ranks exchange a KV-cache shard point-to-point with different tags: send and recv never match.

Scenario: a disaggregated-inference benchmark. Rank 0 (prefill) computes a KV-cache block and
sends it to rank 1 (decode) with `dist.send(kv, dst=1, tag=layer)` for every decode step; rank 1
receives with `dist.recv(buf, src=0, tag=step * 100 + layer)` — the two sides were written
against different versions of the protocol (tag = layer vs. tag = step*100 + layer). For step 0
the tags agree and the 4 layers are exchanged (logged); at step 1 rank 0 sends tag 0 and rank 1
waits for tag 100. From then on rank 0 waits in `send` for a matching recv and rank 1 in `recv`
for a matching send, forever (gloo pairs p2p operations by (peer, tag); a mismatched tag is not
an error).

Mechanism: point-to-point collective ops paired by tag; the two ranks' tags diverge after the first
message. Both ranks wait inside gloo p2p calls on each other; neither is elsewhere.
Truth: culprit the tag scheme of the pair (both ranks: rank 0's send tag=layer, rank 1's recv
tag=step*100+layer); step 0 completed, the log shows it. Fix: one tag function on both
sides.
"""
import datetime
import os
import tempfile

import ray


@ray.remote(num_cpus=0.5)
class Stage:
    def __init__(self, rank: int, path: str):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def ready(self) -> int:
        return self.rank

    def run(self, layers: int, steps: int) -> float:
        import torch
        import torch.distributed as dist

        total = 0.0
        if self.rank == 0:
            for step in range(steps):
                for layer in range(layers):
                    kv = torch.full((256, 64), float(step + layer))
                    dist.send(kv, dst=1, tag=layer)
                    print(f"prefill: step {step} sent layer {layer}", flush=True)
        else:
            for step in range(steps):
                for layer in range(layers):
                    buf = torch.empty((256, 64))
                    dist.recv(buf, src=0, tag=step * 100 + layer)
                    total += float(buf[0, 0])
                    print(f"decode: step {step} got layer {layer}", flush=True)
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="kvp2p_"), "store")
    stages = [Stage.remote(r, path) for r in range(2)]
    ray.get([s.ready.remote() for s in stages])
    refs = [s.run.remote(4, 4) for s in stages]
    print("READY exchanging kv cache", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
