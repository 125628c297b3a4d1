"""Healthy: a Serve streaming deployment yields a chunk every ~50 s; the client iterates the stream.

Scenario: a long-form generation service. `Storyteller.generate` is a sync generator method
(streaming response); for each of 6 chapters it "decodes" with a silent numpy loop of ~50 s, then
yields the chapter. A client actor calls `handle.options(stream=True).generate.remote(6)` and
iterates the DeploymentResponseGenerator, appending chapters without printing.
Mechanism (none: healthy): a Serve streaming request that produces rarely; the client waits in the
generator's `__next__`, the replica thread computes.
Truth: no hang. Right: no-hang or inconclusive; a hang on the client or the replica is false.
"""
# redteam-ray-start: --resources='{"rt15c_st":1}'
# redteam-settle: 25
import os
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.5})
class Storyteller:
    def generate(self, chapters: int):
        import numpy as np

        state = np.random.default_rng(7).standard_normal((300, 300))
        for c in range(chapters):
            end = time.time() + 50.0
            while time.time() < end:
                state = np.tanh(state @ state.T / 300.0)
            yield f"chapter {c}: {float(state.mean()):.4f}"


@ray.remote(num_cpus=0.1)
class Reader:
    def read(self, n):
        h = serve.get_deployment_handle("Storyteller", app_name="stories")
        out = []
        for chunk in h.options(stream=True).generate.remote(n):
            out.append(chunk)
        return out


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve.run(Storyteller.bind(), name="stories", route_prefix=None)
    r = Reader.remote()
    ref = r.read.remote(6)
    print("READY streaming", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
