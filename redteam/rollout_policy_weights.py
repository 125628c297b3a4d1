"""Rollout policy whose act() waits for weights that its sync thread, spinning, never installs.

Scenario: RL rollout workers call RolloutPolicy.act(obs). act() waits (Condition.wait_for) until
the weight-sync thread has installed a weights version >= min_version. The sync thread
busy-polls the parameter store's metadata for a newer version -- but reads the key "version"
while the publisher writes "weights_version", so it sees 0 forever; its back-off sleep was
"temporarily" commented out, so it spins at 100 % CPU and never notifies the condition.
Rollout tasks wait in ray.get on act(); the driver waits on the rollout tasks.

Mechanism: a Condition whose only notifier is a thread of the same actor that spins forever
(the spin's loop state does not change between samples: `seen` stays 0).
Truth: culprit RolloutPolicy's weight-sync thread (_sync_weights spinning on a version that never
changes; wrong metadata key). Fix: read the right key, sleep between polls, time out act().
"""
import os
import threading
import time

import ray


class ParamStoreView:
    """The parameter store's metadata as the rollout side sees it."""

    def __init__(self):
        self.meta = {"weights_version": 7, "shape": [256, 256]}

    def latest(self) -> int:
        return int(self.meta.get("version", 0))


@ray.remote(num_cpus=0.1, max_concurrency=4)
class RolloutPolicy:
    def __init__(self, min_version: int = 1):
        self.store = ParamStoreView()
        self.min_version = min_version
        self.version = 0
        self.ready = threading.Condition()
        threading.Thread(target=self._sync_weights, name="weight-sync", daemon=True).start()

    def _sync_weights(self):
        seen = self.store.latest()
        while seen < self.min_version:
            seen = self.store.latest()
            # time.sleep(0.5)  # back-off disabled while debugging latency
        with self.ready:
            self.version = seen
            self.ready.notify_all()

    def _wait_weights(self):
        with self.ready:
            self.ready.wait_for(lambda: self.version >= self.min_version)

    def act(self, obs: list[float]) -> int:
        self._wait_weights()
        return int(sum(obs) > 0)


@ray.remote(num_cpus=0.1)
def rollout(policy, episode: int) -> int:
    total = 0
    for t in range(10):
        total += ray.get(policy.act.remote([episode - t, 0.5]))
    return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    policy = RolloutPolicy.remote()
    refs = [rollout.remote(policy, e) for e in range(3)]
    time.sleep(3)
    print("READY 3 rollouts started", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
