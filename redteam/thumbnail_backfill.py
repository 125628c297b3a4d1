"""Healthy: a thread pool drains a backlog of 360 slow jobs; the caller waits in as_completed.

# redteam-settle: 25
Scenario: ThumbnailBackfill.run(360) submits 360 thumbnail jobs to a 3-thread
ThreadPoolExecutor. Each job waits ~1.5 s on the (simulated) object store (`time.sleep(1.5)`)
and then resizes a small numpy array. The caller iterates `as_completed(futs)` and prints a
progress line every 60 jobs (about every 30 s). For about 3 minutes the pool threads are mostly
in timed sleeps and the caller in a Condition wait.
Mechanism: a slow backlog; every wait ends by itself.
Truth: healthy (no culprit); run returns after ~3 min. A hang verdict is wrong.
Driver in ray.get(run).
"""
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

import numpy as np
import ray


def thumb(i):
    time.sleep(1.5)
    img = np.full((256, 256), i % 255, dtype=np.uint8)
    return int(img[::4, ::4].sum())


@ray.remote(num_cpus=0.1)
class ThumbnailBackfill:
    def run(self, n):
        done = 0
        with ThreadPoolExecutor(max_workers=3, thread_name_prefix="thumb") as pool:
            futs = [pool.submit(thumb, i) for i in range(n)]
            for f in as_completed(futs):
                f.result()
                done += 1
                if done % 60 == 0:
                    print(f"backfilled {done}/{n}", flush=True)
        return done


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    b = ThumbnailBackfill.remote()
    ref = b.run.remote(360)
    time.sleep(2)
    print("READY: driver -> ThumbnailBackfill.run (360 slow jobs on 3 threads)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
