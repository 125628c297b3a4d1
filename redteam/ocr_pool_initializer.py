"""multiprocessing.Pool whose initializer raises: the pool replaces each dead worker forever and map() never returns.

Scenario: an OcrEval actor scores scanned pages on a 2-process `multiprocessing.Pool` created in
`__init__` with `initializer=load_model` ("load the OCR model once per worker process"). The model
path comes from an env var that is set on the cluster where this ran before but not here, so
`load_model` raises FileNotFoundError in every worker. CPython's Pool does not fail on a raising
initializer: the worker exits, the pool's worker handler starts a new one (every 0.1 s), which
raises again, and so on. `evaluate()` calls `pool.map(score_page, pages)` and waits forever
(`MapResult.wait` -> `Event.wait`); the actor's stderr fills with the same traceback; the pool's
pids change all the time.

Mechanism: a crash loop of child processes inside one actor (a pool initializer that always
raises); the parent waits on results no worker will ever produce.
Truth: culprit OcrEval (its pool's initializer `load_model` raises FileNotFoundError in every
worker; the map waits forever). Fix: validate the model path before creating the pool, or use
concurrent.futures.ProcessPoolExecutor (a failing initializer breaks the pool with BrokenProcessPool).
"""
import multiprocessing as mp
import os
import time

import ray
from _ocr_pages import load_model, score_page


@ray.remote(num_cpus=0.5)
class OcrEval:
    def __init__(self):
        self.pool = mp.get_context("fork").Pool(2, initializer=load_model)

    def evaluate(self, n_pages: int) -> float:
        scores = self.pool.map(score_page, range(n_pages))
        return sum(scores) / len(scores)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ev = OcrEval.remote()
    ref = ev.evaluate.remote(200)
    time.sleep(2)
    print("READY evaluating pages", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
