"""Healthy: a process pool's worker dies once (BrokenProcessPool); the actor rebuilds the pool and computes on.

Scenario: Scorer.score_all scores 6 shards on a `ProcessPoolExecutor(2)` (fork). Shard 1's first
attempt kills its worker (`os._exit(3)`, as an OOM kill would): every pending future raises
BrokenProcessPool, logged once with its traceback. The actor rebuilds the pool and resubmits the
unfinished shards; each is ~1-2 minutes of pure-Python work in the children, nothing logged in
between. The driver waits in ray.get.
Mechanism: a dead pool child and a traceback in the log (once), then live children of a new pool
that run Python bytecode (CPU busy); the actor's main thread waits on their futures.
Truth: healthy (no culprit): the rebuilt pool finishes every shard. Neither a crash loop nor a
lost pool task; a hang verdict is wrong.
"""
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

import ray
from _rt14b_pool import score

FLAG = os.path.join(tempfile.gettempdir(), f"rt14b_pool_{os.getpid()}")


@ray.remote(num_cpus=1)
class Scorer:
    def score_all(self, n, flag):
        todo, done = set(range(6)), {}
        while todo:
            with ProcessPoolExecutor(max_workers=2) as pool:
                try:
                    futs = {pool.submit(score, s, n, flag): s for s in sorted(todo)}
                    for f in as_completed(futs):
                        shard, h = f.result()
                        done[shard] = h
                        todo.discard(shard)
                        print(f"shard {shard} done", flush=True)
                except BrokenProcessPool as e:
                    print(f"pool broken ({e!r}); rebuilding for {sorted(todo)}", flush=True)
        return done


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    sc = Scorer.remote()
    ref = sc.score_all.remote(300_000_000, FLAG)
    time.sleep(6)
    print("READY: driver -> Scorer.score_all (pool rebuilt after a dead worker, children computing)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
