"""A cache-warming actor asks for a node label no node has: it stays pending; the driver waits on it.

Scenario: the job config was written for the production cluster, whose NVMe nodes carry the label
`disk-type=nvme`. ShardCache is created with `.options(label_selector={"disk-type": "nvme"})` so that
it lands on fast disk. This loopback cluster's node has no such label (it has free CPUs).
Mechanism: Ray's scheduler cannot place the actor: no node matches the label selector (the resources
fit). The actor stays PENDING_CREATION; the driver's ray.get(cache.warm.remote()) waits on a call to an
actor that will never start. No process of the job is busy.
Truth: culprit the ShardCache's label_selector (no node has disk-type=nvme); fix: label the nodes
(`ray start --labels disk-type=nvme`) or drop / relax the selector.
"""
import os

import ray


@ray.remote(num_cpus=1)
class ShardCache:
    def warm(self, shards):
        return len(shards)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    config = {"cache": {"label_selector": {"disk-type": "nvme"}}}
    cache = ShardCache.options(label_selector=config["cache"]["label_selector"]).remote()
    ref = cache.warm.remote([f"shard-{i}" for i in range(8)])
    print("READY: driver -> ShardCache.warm (the actor's label_selector matches no node)", flush=True)
    print("warmed", ray.get(ref))


if __name__ == "__main__":
    main()
