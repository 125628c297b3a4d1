"""Nested tasks: parents reserve `memory` and wait in ray.get on children that need memory too.

Mechanism: two process_partition tasks each reserve 45% of the node's `memory` resource and fan
out featurize children that each ask for 20%. A task blocked in ray.get gives back its CPU, not its
memory (nor GPUs or custom resources), so the 10% left can never fit a child: the children stay
PENDING_NODE_ASSIGNMENT, the parents wait in ray.get forever, the driver waits on the parents.
Truth: culprit process_partition's memory reservation held while it waits on its own children
(a parent/child resource deadlock); fix: no memory reservation on the parent (or smaller ones that
leave room for the children), or fan out the children from the driver.
"""
import os
import time

import ray


@ray.remote(num_cpus=0.5)
def featurize(part, i):
    time.sleep(0.2)
    return part * 10 + i


@ray.remote(num_cpus=0.5)
def process_partition(part, child_mem):
    refs = [featurize.options(memory=child_mem).remote(part, i) for i in range(3)]
    return sum(ray.get(refs))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    mem = ray.cluster_resources()["memory"]
    parents = [process_partition.options(memory=int(mem * 0.45)).remote(p, int(mem * 0.2)) for p in range(2)]
    print("READY: 2 partitions (45% memory each) fan out featurize children (20% memory each)", flush=True)
    print(ray.get(parents))


if __name__ == "__main__":
    main()
