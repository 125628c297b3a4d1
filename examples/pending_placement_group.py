"""Trainer controller waiting for a placement group sized for a bigger cluster.

Scenario
    A ``TrainController`` actor (the pattern Ray Train uses) reserves one bundle per training
    worker in a placement group, waits for it with ``ray.get(pg.ready())``, then starts the
    workers inside it. Before that, the driver runs a few small data-preparation tasks that
    succeed.

Mechanism
    ``ScalingConfig`` was copied from the production cluster: 2 workers x ``{"CPU": 64}`` with
    ``STRICT_PACK``. This 4-CPU cluster can never fit a 64-CPU bundle, so the placement group
    stays ``PENDING`` (``stats.scheduling_state: INFEASIBLE``) and ``pg.ready()`` never
    resolves. Ray raises nothing; the controller sits in ``ray.get`` and the driver waits on the
    controller. ``ray status -v`` lists the bundles as a pending placement-group demand.

What misleads
    The controller waits in ``ray.get(pg.ready())`` and no task is pending anywhere, so the task
    list shows nothing to chase. Wrong: ``pg.ready()`` is not a task; ``ray list
    placement-groups --detail`` shows the group ``PENDING`` with ``scheduling_state:
    INFEASIBLE`` - its bundles fit no node.

Expected diagnosis
    ``placement-group-infeasible``: ``TrainController.run`` is blocked in ``ray.get`` on
    ``pg.ready()`` and the placement group ``train_workers`` is PENDING / INFEASIBLE. Culprit:
    the placement group requested by class TrainController. The driver is a victim.
"""

import os
from dataclasses import asdict, dataclass

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

EXPECTED = {
    "verdict": "hang",
    "pattern": "placement-group-infeasible",
    "culprits": [{"class_name": "TrainController", "rank": None}],
    "notes": "TrainController.run waits in ray.get(pg.ready()) on placement group "
    "'train_workers' with 2 x {'CPU': 64} STRICT_PACK bundles on a 4-CPU cluster; the group "
    "is PENDING with scheduling_state INFEASIBLE. Driver waits on TrainController.run.",
}


@dataclass
class ScalingConfig:
    num_workers: int = 2
    cpus_per_worker: int = 64  # from the production cluster config
    placement_strategy: str = "STRICT_PACK"
    num_data_shards: int = 4


@ray.remote(num_cpus=0.1)
def prepare_shard(shard: int) -> dict:
    rows = [(shard * 1000 + i) % 97 for i in range(1000)]
    return {"shard": shard, "rows": len(rows), "checksum": sum(rows)}


@ray.remote
class TrainWorker:
    def __init__(self, rank: int):
        self.rank = rank

    def train(self, shards: list) -> dict:
        return {"rank": self.rank, "rows": sum(s["rows"] for s in shards)}


@ray.remote(num_cpus=0)
class TrainController:
    def __init__(self, cfg: dict):
        self.cfg = ScalingConfig(**cfg)

    def run(self, shards: list) -> list:
        bundles = [{"CPU": self.cfg.cpus_per_worker} for _ in range(self.cfg.num_workers)]
        pg = placement_group(bundles, strategy=self.cfg.placement_strategy, name="train_workers")
        print(f"[controller] waiting for placement group {bundles}", flush=True)
        ray.get(pg.ready())
        workers = [
            TrainWorker.options(
                num_cpus=self.cfg.cpus_per_worker,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=i
                ),
            ).remote(i)
            for i in range(self.cfg.num_workers)
        ]
        return ray.get([w.train.remote(shards[i :: self.cfg.num_workers])
                        for i, w in enumerate(workers)])


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = ScalingConfig()
    shards = ray.get([prepare_shard.remote(i) for i in range(cfg.num_data_shards)])
    print(f"prepared {len(shards)} shards, {sum(s['rows'] for s in shards)} rows", flush=True)
    controller = TrainController.remote(asdict(cfg))
    print("READY: TrainController.run -> ray.get(pg.ready()) for "
          f"{cfg.num_workers} x {{'CPU': {cfg.cpus_per_worker}}}", flush=True)
    results = ray.get(controller.run.remote(shards))
    print(f"training done: {results}", flush=True)


if __name__ == "__main__":
    main()
