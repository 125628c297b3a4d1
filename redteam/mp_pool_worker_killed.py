"""multiprocessing.Pool inside an actor: one pool worker is SIGKILLed (as by the OOM killer).

Mechanism: FeatureExtractor.extract runs pool.map(decode, items) on a 2-process Pool. Decoding
item 5 kills its worker process (SIGKILL, standing in for the kernel OOM killer). Pool starts a
replacement worker but the task the dead worker held is lost: its result never arrives, so
pool.map waits forever (MapResult.wait -> threading.Event.wait, no timeout). The actor's thread
waits; the pool's workers are idle (waiting for new tasks); driver in ray.get.
Truth: culprit FeatureExtractor.extract / the killed pool worker (a lost pool task);
fix: concurrent.futures.ProcessPoolExecutor (raises BrokenProcessPool), map_async(...).get(timeout),
and find why the worker died (memory).
"""
import multiprocessing as mp
import os

import ray
from _pool_jobs import decode  # a pool function must be importable by name


@ray.remote(num_cpus=0.1)
class FeatureExtractor:
    def __init__(self):
        self.pool = mp.get_context("fork").Pool(2)

    def extract(self, n):
        return sum(self.pool.map(decode, range(n), chunksize=1))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    fe = FeatureExtractor.remote()
    print("READY: driver -> FeatureExtractor.extract (pool worker killed on item 5)", flush=True)
    print(ray.get(fe.extract.remote(12)))


if __name__ == "__main__":
    main()
