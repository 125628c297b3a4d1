"""A deployer actor runs serve.run() on its only slot; the replica's constructor calls that actor for its config.

Scenario: a ModelDeployer actor (a plain sync actor: one execution slot) owns the model config and
deploys the Scorer application: `deploy()` calls `serve.run(Scorer.bind(me), ...)`, which blocks
until every replica is RUNNING. Scorer's `__init__` asks the deployer for its config,
`ray.get(deployer.get_config.remote())`. That call is queued behind `deploy()` on the deployer's only
slot, so the replica's constructor never returns, the application never becomes RUNNING and
`serve.run` never returns. The driver waits on `deploy()`. Serve only logs that the replica is slow
to start.

Mechanism: a cycle through Serve's deployment: an actor blocked in serve.run (waiting for the replica
to start) while the replica's constructor waits on a call to that same actor, queued behind it.
Truth: hang; culprit the ModelDeployer's `deploy` (serve.run on its only slot) together with the
Scorer constructor's `ray.get(deployer.get_config.remote())` — the cycle. Fix: pass the config to
`Scorer.bind(config)` (no callback), or `serve.run(..., _blocking=False)`, or give the deployer
max_concurrency=2. The driver is a victim.
"""
# redteam-ray-start: --resources='{"rt14_deployer":1}'
import os

import ray
from ray import serve


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Scorer:
    def __init__(self, deployer):
        self.cfg = ray.get(deployer.get_config.remote())

    def __call__(self, x: float) -> float:
        return x * self.cfg["scale"]


@ray.remote(num_cpus=0.1)
class ModelDeployer:
    def __init__(self):
        self.cfg = {"scale": 2.0, "model": "scorer-v3"}

    def get_config(self) -> dict:
        return self.cfg

    def deploy(self) -> str:
        me = ray.get_runtime_context().current_actor
        print("READY deploying scorer", flush=True)
        serve.run(Scorer.bind(me), name="scorer", route_prefix=None)
        return "deployed"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    deployer = ModelDeployer.remote()
    print(ray.get(deployer.deploy.remote()))


if __name__ == "__main__":
    main()
