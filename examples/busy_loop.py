"""Checkpoint coordinator that spin-waits (holding the GIL) for shards that never all arrive.

Scenario
    Sharded checkpointing: after some epochs the ``Trainer`` asks two ``ShardWriter`` actors to
    persist their shard; each writer reports to a ``CheckpointCoordinator`` actor
    (``max_concurrency=4``, so reports run on their own threads) with ``shard_done``. The Trainer
    then calls ``coordinator.wait_all(epoch)`` before starting the next epoch. ``wait_all``
    spin-waits on a counter ("the writes take microseconds, a spin is cheaper than a
    condition variable").

Mechanism
    The coordinator's ``num_shards`` comes from the model-parallel config (4 shards) while the
    job starts ``num_writers=2`` writers, so the counter stops at 2 and
    ``while self._done[epoch] < self.cfg.num_shards: pass`` spins forever, burning a core with
    the GIL held (other threads still get the GIL at each switch interval, so ``shard_done``
    calls complete). Nothing errors. Epochs are only checkpointed every ``ckpt_every`` epochs, so
    the first epochs succeed.

What misleads
    A busy process looks like one that is working: "it computes, wait longer". Wrong when
    ``(active+gil)`` sits at the same job line in every sample with ~100% CPU: the loop's exit
    condition can never become true. The reverse trap: a poll caught between sleeps also looks
    busy - the CPU column decides.

Expected diagnosis
    ``busy-loop``: the CheckpointCoordinator thread running ``wait_all`` is ``(active+gil)`` in
    py-spy at the ``while`` line in every sample (the process uses ~100% of a core); Trainer waits
    in ``ray.get`` on it; ShardWriters are idle. Culprit: CheckpointCoordinator.
"""

import os
import zlib
from collections import defaultdict
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "busy-loop",
    "culprits": [{"class_name": "CheckpointCoordinator", "rank": None}],
    "notes": "CheckpointCoordinator.wait_all spins 'while done < num_shards: pass' (active+gil, "
    "~100% CPU) with num_shards=4 but only 2 ShardWriters report; Trainer.fit waits in ray.get "
    "on wait_all; driver waits on Trainer.fit.",
}


@dataclass
class ShardedCkptConfig:
    num_epochs: int = 6
    ckpt_every: int = 2
    num_writers: int = 2
    num_shards: int = 4  # from the model-parallel layout (tp=2 x pp=2)
    shard_params: int = 2048


@ray.remote(num_cpus=0.1, max_concurrency=4)
class CheckpointCoordinator:
    def __init__(self, cfg: dict):
        self.cfg = ShardedCkptConfig(**cfg)
        self._done = defaultdict(int)
        self._crc = defaultdict(int)

    def shard_done(self, epoch: int, shard: int, crc: int) -> None:
        self._done[epoch] += 1
        self._crc[epoch] ^= crc

    def wait_all(self, epoch: int) -> int:
        while self._done[epoch] < self.cfg.num_shards:
            pass
        return self._crc[epoch]


@ray.remote(num_cpus=0.1)
class ShardWriter:
    def __init__(self, shard: int, coordinator, cfg: dict):
        self.cfg = ShardedCkptConfig(**cfg)
        self.shard = shard
        self.coordinator = coordinator

    def persist(self, epoch: int, params: list) -> int:
        blob = ",".join(f"{p:.6f}" for p in params).encode()
        crc = zlib.crc32(blob)
        ray.get(self.coordinator.shard_done.remote(epoch, self.shard, crc))
        return crc


@ray.remote(num_cpus=0.1)
class Trainer:
    def __init__(self, coordinator, writers, cfg: dict):
        self.cfg = ShardedCkptConfig(**cfg)
        self.coordinator = coordinator
        self.writers = writers
        self.params = [0.0] * (self.cfg.shard_params * len(writers))

    def fit(self) -> dict:
        n = self.cfg.shard_params
        for epoch in range(self.cfg.num_epochs):
            self.params = [p + 0.001 * (i % 7) for i, p in enumerate(self.params)]
            print(f"[trainer] epoch {epoch} done", flush=True)
            if (epoch + 1) % self.cfg.ckpt_every == 0:
                ray.get([w.persist.remote(epoch, self.params[i * n:(i + 1) * n])
                         for i, w in enumerate(self.writers)])
                crc = ray.get(self.coordinator.wait_all.remote(epoch))
                print(f"[trainer] checkpoint for epoch {epoch} complete (crc {crc:#x})",
                      flush=True)
        return {"epochs": self.cfg.num_epochs}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = ShardedCkptConfig()
    coordinator = CheckpointCoordinator.remote(asdict(cfg))
    writers = [ShardWriter.remote(i, coordinator, asdict(cfg)) for i in range(cfg.num_writers)]
    trainer = Trainer.remote(coordinator, writers, asdict(cfg))
    print(f"READY: Trainer.fit -> CheckpointCoordinator.wait_all (first checkpoint after "
          f"epoch {cfg.ckpt_every - 1})", flush=True)
    print(ray.get(trainer.fit.remote()), flush=True)


if __name__ == "__main__":
    main()
