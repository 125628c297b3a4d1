"""Ray Data UDF actors take every CPU before the read operator runs: the pipeline never starts.

Scenario: a map_batches callable class (ActorPoolStrategy, 2 actors x 2 CPUs on a 4-CPU
cluster) that would enrich each batch through a small inner Ray Data pipeline. Ray Data starts
the actor pool first; the two UDF actors hold all four CPUs, idle (no batch has arrived); the
upstream ReadRange task needs 1 CPU and stays PENDING_NODE_ASSIGNMENT. The progress log shows
"MapBatches(Enricher): 0/1 ... Actors: 2 ... Resources: 4.0 CPU" and nothing moves. (Written to
starve the inner pipeline from inside `__call__`; on Ray 2.60 it deadlocks one step earlier, as
described: that is the truth of this job.)

Mechanism: idle actors (Ray Data's own actor pool) hold the CPUs a pending task of the same
pipeline needs.
Truth: culprit the two MapWorker(MapBatches(Enricher)) actors (4 CPU, idle); the pending ReadRange
task and the driver in take() are victims. Fix: leave CPUs for the other operators (num_cpus=1 per
UDF actor, concurrency=1, or a smaller pool); killing the pool's actors is not a fix.
"""
# redteam-settle: 25
import os

import ray


class Enricher:
    def __call__(self, batch):
        import ray as _ray

        keys = [{"k": int(k)} for k in batch["id"][:4]]
        rows = _ray.data.from_items(keys).map(lambda r: {"k": r["k"], "v": r["k"] * 2}).take_all()
        batch["v"] = [len(rows)] * len(batch["id"])
        return batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ds = ray.data.range(64, override_num_blocks=8).map_batches(
        Enricher, concurrency=2, num_cpus=2, batch_size=8)
    print("READY enriching", flush=True)
    print(ds.take(4))


if __name__ == "__main__":
    main()
