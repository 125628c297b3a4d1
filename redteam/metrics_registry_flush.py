"""Metrics registry whose checkpoint() waits for a flush while holding the lock the flusher needs.

Scenario: a training loop records metrics into a MetricsRegistry actor and calls
checkpoint(step) every few steps; checkpoint wants the metrics durably flushed before it returns,
so under self._lock it clears self._flushed and waits for the flush thread to set it. The flush
thread, every 0.5 s, takes self._lock to snapshot the series -- so it blocks on the lock that the
waiting checkpoint() holds, and never reaches _flushed.set(). The trainer waits in ray.get on
checkpoint(); the driver waits on the trainer.

Mechanism: an Event whose only setter is a thread of the same actor blocked elsewhere -- on a
lock held by the waiter itself (lock + event cycle inside one process).
Truth: culprit MetricsRegistry.checkpoint (waits on _flushed while holding _lock; the
metrics-flush thread is blocked on _lock). Fix: wait for the flush outside the lock.
"""
import json
import os
import tempfile
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class MetricsRegistry:
    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._flushed = threading.Event()
        self._series: dict[str, list[float]] = {}
        threading.Thread(target=self._flush_loop, name="metrics-flush", daemon=True).start()

    def _write(self, snapshot: dict) -> None:
        with open(self.path, "w") as fh:
            json.dump(snapshot, fh)

    def _flush_loop(self):
        while True:
            time.sleep(0.5)
            with self._lock:
                snapshot = {k: list(v) for k, v in self._series.items()}
            self._write(snapshot)
            self._flushed.set()

    def record(self, name: str, value: float) -> None:
        with self._lock:
            self._series.setdefault(name, []).append(value)

    def _await_durable(self, step: int) -> None:
        self._flushed.wait()

    def checkpoint(self, step: int) -> int:
        with self._lock:
            self._series.setdefault("checkpoint_step", []).append(step)
            self._flushed.clear()
            self._await_durable(step)
        return step


@ray.remote(num_cpus=0.1)
class Trainer:
    def __init__(self, registry):
        self.registry = registry

    def fit(self, steps: int) -> int:
        for step in range(steps):
            ray.get(self.registry.record.remote("loss", 1.0 / (step + 1)))
            if step % 3 == 2:
                ray.get(self.registry.checkpoint.remote(step))
                print(f"checkpointed step {step}", flush=True)
        return steps


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    registry = MetricsRegistry.remote(os.path.join(tempfile.gettempdir(), f"metrics-{os.getpid()}.json"))
    trainer = Trainer.remote(registry)
    ref = trainer.fit.remote(300)
    print("READY training with checkpoints every 3 steps", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
