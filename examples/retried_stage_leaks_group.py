"""A retried task waits for the accelerators its own first attempt reserved and left behind.

Scenario
    A pipeline's ``train_stage`` task (``max_retries=2``, so that a lost worker is retried)
    reserves the node's two accelerators for its loader workers with an unnamed placement group
    (two bundles ``{"accelerator": 1}``), starts a ``ShardLoader`` actor in each bundle and
    trains. The first attempt's worker process is lost right after the loaders are up (here a
    transient failure, the way a preempted or OOM-killed worker goes).

Mechanism
    Ray retries the task. The loaders were owned by the dead worker and died with it, but the
    group was not: a placement group lives until its job ends or ``remove_placement_group`` is
    called, whoever created it. The retry reserves the same two accelerators again; the first
    attempt's group, CREATED and used by nothing (its actors DEAD), still holds both. The
    retry waits in ``pg.ready()`` forever: its group is ``PENDING`` with
    ``scheduling_state: NO_RESOURCES``. ``ray status`` reads ``0.0/2.0 accelerator (0.0 used of
    2.0 reserved in placement groups)`` and lists the retry's group as a pending demand.

What misleads
    The waiting group looks like the problem (an unplaceable request, or the cluster "full"
    while ``ray status`` says nothing is used); the failed attempt looks like history. Wrong: the
    failed attempt's group is what holds the accelerators, and every retry adds one more.

Expected diagnosis
    ``placement-group-leaked``: ``train_stage`` (attempt 1) waits in ``pg.ready()`` for its
    group, PENDING for ``{accelerator: 2}``; the culprit is the group the failed attempt 0
    requested (its ShardLoaders DEAD), known by the task that made it. Fix: remove the group in
    a ``finally`` (or create it in the driver, outside the retried task), and let the retry
    reuse it.
"""

import os
import time

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

EXPECTED = {
    "verdict": "hang",
    "pattern": "placement-group-leaked",
    "culprits": [{"class_name": "train_stage", "rank": None}],
    "notes": "attempt 0 of train_stage reserves both accelerators in an unnamed group, starts its loaders and "
    "its worker is lost; the group outlives it (CREATED, actors DEAD); attempt 1's identical group is PENDING "
    "(NO_RESOURCES), the task waits in pg.ready().",
}


@ray.remote(num_cpus=0)
class ShardLoader:
    def __init__(self, shard: int) -> None:
        self.shard = shard

    def ready(self) -> int:
        return self.shard


@ray.remote(num_cpus=0, max_retries=2)
def train_stage(lost_marker: str) -> str:
    pg = placement_group([{"accelerator": 1}] * 2)  # one bundle per loader
    ray.get(pg.ready())
    loaders = [ShardLoader.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, i)).remote(i)
               for i in range(2)]
    print(f"loaders up: {ray.get([loader.ready.remote() for loader in loaders])}", flush=True)
    if not os.path.exists(lost_marker):  # the transient loss of this worker, once
        open(lost_marker, "w").close()
        os._exit(1)
    return "trained"


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    marker = f"/tmp/retried_stage_leaks_group_{os.getpid()}_{time.time_ns()}"
    ref = train_stage.remote(marker)
    # the harness's marker: the first attempt is lost and the retry has asked for its group
    while not any(pg["state"] == "PENDING" for pg in ray.util.placement_group_table().values()):
        time.sleep(0.5)
    print("READY: train_stage retried after its first worker was lost", flush=True)
    print(ray.get(ref), flush=True)


if __name__ == "__main__":
    main()
