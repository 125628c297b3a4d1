"""The driver itself maps over a multiprocessing.Pool whose initializer raises: map() never returns.

Scenario: a thumbnail-indexing job's entrypoint script connects to Ray, checks the cluster with
one small task, then embeds its images on a local 2-process `multiprocessing.Pool` created with
`initializer=load_encoder` ("load the encoder weights once per worker"). The weights path comes
from an env var that is set on the team's cluster but not here, so `load_encoder` raises
FileNotFoundError in every worker. CPython's Pool does not fail on a raising initializer: the
worker exits, the pool's worker handler starts a new one (every 0.1 s), which raises again, and so
on. The driver's `pool.map(embed, images)` waits forever (`MapResult.wait` -> `Event.wait`); the
job's driver log fills with the same traceback; the pool's pids change all the time. No actor and
no Ray task is involved in the wait: the waiting parent is the driver.

Mechanism: a crash loop of child processes of the driver (a pool initializer that always raises);
the driver waits on results no worker will ever produce.
Truth: culprit the driver (its pool's initializer `load_encoder` raises FileNotFoundError in every
worker; the map waits forever). Fix: validate the weights path before creating the pool, or use
concurrent.futures.ProcessPoolExecutor (a failing initializer breaks the pool with BrokenProcessPool).
"""
import multiprocessing as mp
import os
import time

import ray

_WEIGHTS: bytes | None = None


def load_encoder() -> None:
    global _WEIGHTS
    path = os.environ.get("THUMB_ENCODER_PATH", "/models/thumbs/encoder-v2.bin")
    with open(path, "rb") as fh:
        _WEIGHTS = fh.read(16)


def embed(i: int) -> float:
    assert _WEIGHTS is not None
    return (i * 104729 % 97) / 96.0


@ray.remote(num_cpus=0.1)
def cluster_ok() -> bool:
    return True


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    assert ray.get(cluster_ok.remote())
    pool = mp.get_context("fork").Pool(2, initializer=load_encoder)
    time.sleep(1)
    print("READY embedding images on the driver's pool", flush=True)
    vectors = pool.map(embed, range(500))
    print(sum(vectors) / len(vectors))


if __name__ == "__main__":
    main()
