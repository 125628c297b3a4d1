"""Rollout coordinator calls a Serve reward deployment that calls back into the coordinator.

Scenario: RLHF-style rollouts. RolloutCoordinator (a plain, single-threaded Ray actor named
"rollout-coordinator") scores each trajectory through the Serve deployment RewardScorer with a
DeploymentHandle: `self.scorer.remote(traj).result()`. The scorer normalises rewards against a
running baseline it fetches from the coordinator (`await coordinator.baseline.remote()`), added
later "to share the baseline". baseline() is queued behind collect(), which blocks in
DeploymentResponse.result() on the replica that awaits it.

Mechanism: a Serve replica calling back its caller: cycle coordinator.collect ->
(DeploymentHandle) RewardScorer replica -> coordinator.baseline (queued, SUBMITTED_TO_WORKER
behind the running collect). The replica has no task rows for its request; its awaiting
coroutine is invisible to py-spy.
Truth: culprit RolloutCoordinator (blocks its only thread on a request whose handling needs a call
into it) -- cycle with the RewardScorer replica. Fix: pass the baseline in the request, or make the
coordinator async/threaded (max_concurrency > 1).
"""
# redteam-ray-start: --resources='{"serve_reward":1}'
import os

import ray
from ray import serve


@serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class RewardScorer:
    def __init__(self):
        self.coordinator = None

    async def _baseline(self) -> float:
        if self.coordinator is None:
            self.coordinator = ray.get_actor("rollout-coordinator")
        return await self.coordinator.baseline.remote()

    async def __call__(self, traj: dict) -> float:
        raw = sum(traj["rewards"]) / len(traj["rewards"])
        return raw - await self._baseline()


@ray.remote(num_cpus=0.1)
class RolloutCoordinator:
    def __init__(self):
        self.scorer = serve.get_deployment_handle("RewardScorer", app_name="reward")
        self.running = 0.0

    def baseline(self) -> float:
        return self.running

    def _score(self, traj: dict) -> float:
        return self.scorer.remote(traj).result()

    def collect(self, episodes: int) -> float:
        total = 0.0
        for e in range(episodes):
            adv = self._score({"episode": e, "rewards": [0.1 * e, 0.2, 0.3]})
            self.running = 0.9 * self.running + 0.1 * adv
            total += adv
        return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    serve.start(proxy_location="Disabled")
    serve.run(RewardScorer.bind(), name="reward", route_prefix=None)
    coord = RolloutCoordinator.options(name="rollout-coordinator").remote()
    ref = coord.collect.remote(16)
    print("READY collecting 16 episodes", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
