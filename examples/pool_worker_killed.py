"""Feature extractor whose multiprocessing.Pool lost a task: one pool worker was killed mid-task.

Scenario
    A ``FeatureExtractor`` actor decodes records on a 2-process ``multiprocessing.Pool`` (fork)
    it creates in ``__init__``: ``extract(n)`` runs ``pool.map(decode_record, range(n))``. The
    driver waits for ``extract`` in ``ray.get``. Record 5 is a pathological one: decoding it
    makes its pool worker die at once (here ``SIGKILL`` to itself, standing in for the kernel
    OOM killer picking the worker that blew up).

Mechanism
    ``multiprocessing.Pool`` notices that a worker exited and starts a replacement, but the task
    the dead worker held is lost: its result never arrives and nothing fails it, so
    ``pool.map`` waits forever (``MapResult.wait`` -> ``threading.Event.wait``, no timeout). The
    pool's task handler has handed out every task; both pool workers (the survivor and the
    replacement) sit in ``SimpleQueue.get`` waiting for a new task. A SIGKILL leaves no
    traceback anywhere.

What misleads
    The actor waits on its child processes and the children are stuck in ``multiprocessing``
    code (one reading a pipe, the other at the queue's lock, which looks like a lock inherited
    through fork): it reads as "the pool workers hang". Wrong: they are idle, waiting for work;
    the pool holds no task at all — the awaited result belonged to a worker that no longer exists.

Expected diagnosis
    ``pool-task-lost``: FeatureExtractor waits in ``Pool.map`` while every task was handed out
    and each pool worker waits for a new one; the workers' process titles show they were forked
    during different calls (a replacement). Culprit: FeatureExtractor (use
    ``ProcessPoolExecutor``, which raises ``BrokenProcessPool``, or a timeout; find why the worker
    died). The driver waits on ``extract``.
"""

import importlib
import multiprocessing as mp
import os
import signal
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "pool-task-lost",
    "culprits": [{"class_name": "FeatureExtractor", "rank": None}],
    "notes": "pool worker decoding record 5 is SIGKILLed (OOM-killer stand-in); Pool replaces it but "
    "the task is lost; FeatureExtractor.extract waits in Pool.map forever while both pool workers wait "
    "for new tasks; driver in ray.get on extract.",
}


def decode_record(i: int) -> int:
    time.sleep(0.1)  # parse + feature computation
    if i == 5:
        os.kill(os.getpid(), signal.SIGKILL)  # stands in for the kernel OOM killer
    return i * i


@ray.remote(num_cpus=0.1)
class FeatureExtractor:
    def __init__(self, processes: int = 2):
        # Pool pickles its function by name: take it from the job's module (as from a package),
        # since a function of __main__ cannot be found by name in this worker.
        self.decode = importlib.import_module("pool_worker_killed").decode_record
        self.pool = mp.get_context("fork").Pool(processes)

    def extract(self, n: int) -> int:
        return sum(self.pool.map(self.decode, range(n), chunksize=1))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    extractor = FeatureExtractor.remote()
    print("READY: driver -> FeatureExtractor.extract -> Pool.map (a pool worker dies on record 5)", flush=True)
    print(ray.get(extractor.extract.remote(12)), flush=True)


if __name__ == "__main__":
    main()
