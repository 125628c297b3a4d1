"""Feature server whose buffer handles release themselves in ``__del__``: a GC pass inside the pool's lock.

Scenario
    A ``FeatureServer`` actor serves feature batches to a ``Trainer``. Remote feature buffers are
    held through ``BufferHandle`` objects; a handle releases its buffer by scheduling a release
    request on the server's ``ThreadPoolExecutor`` from ``__del__``. Every handle registers a
    completion callback that refers back to it, so handles sit in reference cycles and only
    Python's cyclic garbage collector frees them, at whatever allocation starts a collection. Per
    batch the server collects garbage (to return the last batch's memory), stats the buffer
    through a short-lived metadata handle, then reads it through the pool. The server runs with a
    low GC threshold (10), as services that churn many small objects do; it makes a rare race
    happen at the first batch.

Mechanism
    ``ThreadPoolExecutor.submit`` holds the executor's ``_shutdown_lock`` (a ``threading.Lock``)
    while it allocates the ``Future`` and work item. One of those allocations starts a GC pass,
    which finalises the metadata handle dropped just before; its ``__del__`` calls ``submit`` on
    the same executor, on the same thread, and waits for ``_shutdown_lock``, which that thread holds
    further down its own stack. ``threading.Lock`` is not reentrant: the thread waits forever at a
    frame of the standard library, reached from ``__del__`` (the Ray Client form:
    ``ClientObjectRef.__del__`` re-taking ``DataClient.lock``, ray-project/ray#59643).
    ``FeatureServer.batch`` never returns; ``Trainer.fit`` waits in ``ray.get`` on it, the driver
    on ``Trainer.fit``.

What misleads
    Every frame around the wait is the standard library or Ray (``ThreadPoolExecutor.submit``,
    ``concurrent/futures/thread.py``), so it looks like Ray's or Python's own idle machinery, or a
    pool that is merely busy. It is neither: the thread waits for a lock that it holds itself, two
    frames further down, and the ``BufferHandle.__del__`` between them was started by the garbage
    collector, not called by any line of the job.

Expected diagnosis
    ``lock-self-deadlock``: the FeatureServer's only job thread waits in
    ``ThreadPoolExecutor.submit`` (``concurrent/futures/thread.py``) at ``with self._shutdown_lock,
    _global_shutdown_lock:``, reached from ``BufferHandle.__del__`` run inside an outer
    ``ThreadPoolExecutor.submit`` of the same thread; no other thread can hold the lock. Culprit:
    FeatureServer. Trainer.fit waits in ray.get on FeatureServer.batch; the driver on Trainer.fit.
"""

import gc
import os
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "lock-self-deadlock",
    "culprits": [{"class_name": "FeatureServer", "rank": None}],
    "notes": "A GC pass inside ThreadPoolExecutor.submit (holding _shutdown_lock) finalises a BufferHandle "
    "whose __del__ calls submit on the same executor: the thread waits for a non-reentrant lock it holds. "
    "Trainer.fit in ray.get on FeatureServer.batch; driver on Trainer.fit.",
}


@dataclass
class FeatureConfig:
    num_steps: int = 20
    rows: int = 64
    gc_threshold: int = 10  # a collection every 10 container allocations
    seed: int = 0


class BufferHandle:
    def __init__(self, pool: ThreadPoolExecutor, buffer_id: int, future) -> None:
        self.pool = pool
        self.buffer_id = buffer_id
        self.future = future
        self.on_done = lambda _f: self  # completion callback: a reference cycle through the handle

    def __del__(self) -> None:
        self.pool.submit(_release, self.buffer_id)


def _release(buffer_id: int) -> None:
    pass


@ray.remote(num_cpus=0.25)
class FeatureServer:
    def __init__(self, cfg: dict):
        self.cfg = FeatureConfig(**cfg)
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feature-io")
        rng = random.Random(self.cfg.seed)
        self.buffers = [[[rng.random() for _ in range(4)] for _ in range(self.cfg.rows)] for _ in range(4)]
        gc.set_threshold(self.cfg.gc_threshold)

    def _read(self, buffer_id: int) -> list:
        return self.buffers[buffer_id % len(self.buffers)]

    def batch(self, step: int) -> list:
        gc.collect()  # return the last batch's memory
        meta = BufferHandle(self.pool, step, None)  # stat the buffer
        rows = len(self.buffers[step % len(self.buffers)])
        del meta
        handle = BufferHandle(self.pool, step, self.pool.submit(self._read, step))
        data = handle.future.result()
        return [sum(col) / rows for col in zip(*data)]


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, server, cfg: dict):
        self.server = server
        self.cfg = FeatureConfig(**cfg)
        self.w = [0.0] * 4

    def fit(self) -> list:
        for step in range(self.cfg.num_steps):
            means = ray.get(self.server.batch.remote(step))
            self.w = [wi + 0.1 * (m - wi) for wi, m in zip(self.w, means)]
            print(f"[trainer] step {step}: w0 {self.w[0]:.4f}", flush=True)
        return self.w


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = asdict(FeatureConfig())
    server = FeatureServer.remote(cfg)
    trainer = Trainer.remote(server, cfg)
    print("READY: Trainer.fit -> FeatureServer.batch (handles released from __del__ by the GC)", flush=True)
    print(f"weights: {ray.get(trainer.fit.remote())}", flush=True)


if __name__ == "__main__":
    main()
