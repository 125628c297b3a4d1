"""Healthy: a gloo rank waits in recv for its peer, which itself waits in ray.get on a featurizer actor that computes.

Scenario: two pipeline stages on gloo. Stage 0 asks a Featurizer actor for the next micro-batch's
features (`ray.get(featurizer.featurize.remote(i))`, a few minutes of numpy work per batch) and
then sends the activation to stage 1; stage 1 sits in `dist.recv(src=0)`. So the waits form a
chain: stage 1 (gloo recv) → stage 0 (ray.get) → Featurizer (busy numpy). Nobody logs and no
task finishes for minutes.

Mechanism: a collective/p2p wait whose peer is itself in a Ray wait whose end is a live, working
actor: the chain ends in progress, not in a cycle or an idle process.
Truth: healthy (no hang); each micro-batch takes ~4 min. A right answer is no-hang, or
inconclusive naming the Featurizer's computation; "hang" is a false hang, and naming stage 1 or
stage 0 as culprit is naming a victim.
"""
import datetime
import os
import tempfile
import time

import ray


@ray.remote(num_cpus=0.5)
class Featurizer:
    def featurize(self, i, seconds):
        import numpy as np

        rng = np.random.default_rng(i)
        a = rng.standard_normal((300, 300))
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            a = np.tanh(a @ a.T / 300.0)
        return a[:64, :64].copy()


@ray.remote(num_cpus=0.5)
class Stage:
    def __init__(self, rank, path):
        import torch.distributed as dist

        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2,
                                timeout=datetime.timedelta(hours=1))
        self.rank = rank

    def ready(self):
        return self.rank

    def run(self, featurizer, n_micro, seconds):
        import torch
        import torch.distributed as dist

        got = []
        for i in range(n_micro):
            if self.rank == 0:
                feats = ray.get(featurizer.featurize.remote(i, seconds))
                dist.send(torch.from_numpy(feats).float().flatten(), dst=1)
            else:
                buf = torch.empty(64 * 64)
                dist.recv(buf, src=0)
                got.append(float(buf.sum()))
        return len(got)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    path = os.path.join(tempfile.mkdtemp(prefix="rt11_chain_"), "store")
    feat = Featurizer.remote()
    stages = [Stage.remote(r, path) for r in range(2)]
    ray.get([s.ready.remote() for s in stages])
    refs = [s.run.remote(feat, 2, 240) for s in stages]
    time.sleep(8)
    print("READY: stage 1 recv <- stage 0 ray.get <- Featurizer computing ~4 min per batch", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
