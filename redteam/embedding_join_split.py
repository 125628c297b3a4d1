"""Ray Data join against an embedding table actor whose loader thread died; trainers in streaming_split.

Scenario: two TrainWorker actors consume ds.streaming_split(2). The dataset maps token batches
through an actor-pool UDF (EmbedTokens, concurrency=2) that looks up vectors in a shared
EmbeddingTable actor (named "embedding-table", handed to the UDF's constructor). The table loads its shards in a background
thread at start-up and lookup() waits on self._loaded; the loader raised FileNotFoundError (the
shard path is wrong) so _loaded is never set. Every EmbedTokens actor waits in ray.get on a
lookup; the train workers wait in the split iterator; the driver waits on the trainers.

Mechanism: a Ray Data map_batches actor-pool UDF blocked in ray.get on an actor whose Event is
never set (its setter thread is gone; the traceback is in the table actor's worker log).
Truth: culprit EmbeddingTable (loader thread died; _loaded never set). The MapBatches(EmbedTokens)
actors, the SplitCoordinator, the train workers and the driver are victims.
Fix: surface the loader's exception (set an error and raise it in lookup), fix the shard path.
"""
# redteam-settle: 40
import os
import threading

import numpy as np
import ray


@ray.remote(num_cpus=0.1, max_concurrency=8)
class EmbeddingTable:
    def __init__(self, shard_dir: str, dim: int = 32):
        self.dim = dim
        self.table: np.ndarray | None = None
        self._loaded = threading.Event()
        threading.Thread(target=self._load, args=(shard_dir,), name="table-loader", daemon=True).start()

    def _load(self, shard_dir: str) -> None:
        shards = sorted(os.listdir(shard_dir))
        self.table = np.concatenate([np.load(os.path.join(shard_dir, s)) for s in shards])
        self._loaded.set()

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        self._loaded.wait()
        assert self.table is not None
        return self.table[ids % len(self.table)]


class EmbedTokens:
    def __init__(self, table):
        self.table = table

    def __call__(self, batch: dict) -> dict:
        vecs = ray.get(self.table.lookup.remote(batch["id"]))
        return {"id": batch["id"], "emb": vecs}


@ray.remote(num_cpus=0.1)
class TrainWorker:
    def train(self, shard) -> int:
        seen = 0
        for batch in shard.iter_batches(batch_size=64):
            seen += len(batch["id"])
        return seen


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ray.data.DataContext.get_current().enable_progress_bars = False
    table = EmbeddingTable.options(name="embedding-table").remote("/data/embeddings/v3/shards")
    ds = ray.data.range(20_000, override_num_blocks=40).map_batches(EmbedTokens, batch_size=256,
                                                                     fn_constructor_kwargs={"table": table},
                                                                     concurrency=2, num_cpus=0.25)
    workers = [TrainWorker.remote() for _ in range(2)]
    splits = ds.streaming_split(2, equal=True)
    refs = [w.train.remote(s) for w, s in zip(workers, splits, strict=True)]
    print("READY 2 train workers consuming the split", flush=True)
    print(ray.get(refs))


if __name__ == "__main__":
    main()
