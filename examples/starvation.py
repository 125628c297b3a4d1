"""Data-loading actors that take every CPU and then wait for tasks that need one.

Scenario
    The input pipeline starts one ``ShardLoader`` actor per CPU of the cluster ("use the whole
    machine"), each reserving ``num_cpus=1``. A loader reads its shard and fans the decoding out
    to ``decode_chunk`` tasks (default ``num_cpus=1``), then ``ray.get``\\ s them. The driver waits
    for all loaders.

Mechanism
    Actors keep the CPUs they reserved while they sit in ``ray.get`` (unlike normal tasks, which
    release theirs while blocked). With ``num_loaders == cluster CPUs`` (4 here), the four
    loaders hold 4.0/4.0 CPU and every ``decode_chunk`` task waits for a CPU that will never be
    freed: the tasks stay ``PENDING_NODE_ASSIGNMENT`` forever. No error, no warning, no
    autoscaler event: the demand is feasible, just never satisfied.

What misleads
    Every CPU is reserved and tasks stay ``PENDING_NODE_ASSIGNMENT``: "add nodes". Wrong: the
    holders are actors blocked in ``ray.get`` (actors keep their CPUs while blocked, normal
    tasks release theirs) waiting on those very tasks; more nodes only move the ceiling - give
    the waiting actors ``num_cpus=0``.

Expected diagnosis
    ``resource-starvation``: all ShardLoader actors are blocked in ``ray.get`` in
    ``ShardLoader.load``, ``ray status`` shows 4.0/4.0 CPU used with ``{'CPU': 1.0}`` pending
    demands, and the decode_chunk tasks are PENDING_NODE_ASSIGNMENT. Culprits: the ShardLoader
    actors (they hold the CPUs). Fix: ``num_cpus=0``/fractional for the loaders, or fewer
    loaders than CPUs.
"""

import os
import zlib
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "resource-starvation",
    "culprits": [{"class_name": "ShardLoader", "rank": None}],
    "notes": "one ShardLoader (num_cpus=1) per cluster CPU holds 4.0/4.0 CPU while blocked in "
    "ray.get on decode_chunk tasks (num_cpus=1) that stay PENDING_NODE_ASSIGNMENT; no event, "
    "no warning. Driver waits in ray.get on ShardLoader.load.",
}


@dataclass
class LoaderConfig:
    num_loaders: int = 0  # 0 = one per CPU in the cluster
    chunks_per_shard: int = 4
    chunk_bytes: int = 4096
    seed: int = 11


@ray.remote
def decode_chunk(shard: int, chunk: int, raw: bytes) -> dict:
    return {"shard": shard, "chunk": chunk, "crc": zlib.crc32(raw), "n": len(raw)}


@ray.remote(num_cpus=1)
class ShardLoader:
    def __init__(self, shard: int, cfg: dict):
        self.cfg = LoaderConfig(**cfg)
        self.shard = shard

    def read_raw(self) -> list:
        return [bytes((self.shard * 31 + c + i) % 256 for i in range(self.cfg.chunk_bytes))
                for c in range(self.cfg.chunks_per_shard)]

    def load(self) -> dict:
        raw = self.read_raw()
        print(f"[loader {self.shard}] read {len(raw)} chunks, decoding", flush=True)
        decoded = ray.get([decode_chunk.remote(self.shard, c, r) for c, r in enumerate(raw)])
        return {"shard": self.shard, "bytes": sum(d["n"] for d in decoded)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = LoaderConfig()
    if cfg.num_loaders == 0:
        cfg.num_loaders = int(ray.cluster_resources().get("CPU", 1))
    print(f"starting {cfg.num_loaders} shard loaders (one per CPU)", flush=True)
    loaders = [ShardLoader.remote(i, asdict(cfg)) for i in range(cfg.num_loaders)]
    print(f"READY: {cfg.num_loaders} ShardLoader.load -> decode_chunk tasks", flush=True)
    stats = ray.get([loader.load.remote() for loader in loaders])
    print(f"loaded {sum(s['bytes'] for s in stats)} bytes", flush=True)


if __name__ == "__main__":
    main()
