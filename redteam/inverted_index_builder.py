"""Index builder whose process pool is filled by consumers waiting for producers it has queued.

Scenario: a search-index job builds per-shard postings in a ProcessPoolExecutor (2 processes).
For each of 3 shards it makes a multiprocessing.Manager queue, submits the postings builder
(a consumer reading the queue until None) and, after all builders, the shard readers (producers).
The first two builders take both pool processes and wait in the Manager proxy's get(); the
readers that would feed them sit in the pool's call queue forever. The actor waits in
Future.result(), the driver in ray.get.

Mechanism: a process pool waiting on itself through a Manager proxy queue (consumers submitted
before their producers occupy every worker); the wait is in the pool children, a Manager server
process holds the queues.
Truth: culprit ShardIndexer (submission order in build(): its pool workers all wait on queues that
only not-yet-started jobs of the same pool feed). Fix: submit the readers first, or run readers
outside the pool (threads), or size the pool for both.
"""
import concurrent.futures as cf
import multiprocessing as mp
import os

import ray
from _index_jobs import build_postings, read_shard


@ray.remote(num_cpus=0.2)
class ShardIndexer:
    def build(self, shards: int, docs_per_shard: int) -> dict[int, int]:
        manager = mp.Manager()
        inboxes = [manager.Queue(maxsize=8) for _ in range(shards)]
        with cf.ProcessPoolExecutor(max_workers=2) as pool:
            builders = {s: pool.submit(build_postings, s, inboxes[s]) for s in range(shards)}
            for s in range(shards):
                pool.submit(read_shard, s, inboxes[s], docs_per_shard)
            return {s: f.result() for s, f in builders.items()}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    indexer = ShardIndexer.remote()
    ref = indexer.build.remote(3, 2000)
    print("READY building index for 3 shards", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
