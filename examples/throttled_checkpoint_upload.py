"""A healthy trainer in a long, throttled checkpoint upload: nothing finishes for minutes, yet it moves.

Scenario
    A ``Trainer`` actor trains a small model for a few epochs, then uploads its checkpoint to
    "object storage" (a directory standing in for a bucket mount) in 600 chunks. Uploads are
    rate-limited to one chunk a second by a token-bucket ``RateLimiter`` (the shared uplink is
    metered), so the upload takes ten minutes. The driver waits in ``ray.get`` on
    ``Trainer.fit``.

Mechanism
    Nothing is wrong. During the upload the task table does not change (``Trainer.fit`` stays
    RUNNING, nothing finishes), and every stack sample lands in ``time.sleep`` inside
    ``RateLimiter.acquire``: one chunk is written in a millisecond, then the limiter sleeps for
    the rest of the second, for a duration it computes from the bytes sent. A tool that reads
    "sleep in a loop, task table frozen" as a poll that is never satisfied calls it hung. What
    shows progress: the trainer logs ``saved chunk 75/600`` then ``76/600`` every second (its
    worker log and the driver log grow), and it writes 256 KiB a second to disk.

What misleads
    Both stack samples show ``time.sleep`` (inside a rate limiter's ``acquire``) and no task
    finishes during the upload, so a poll that never ends, or a lock wait, is the tempting
    reading. Wrong: the sleep's duration is computed and always ends; in the window the trainer
    wrote to disk and logged ``saved chunk N/600`` with the counter advancing. It is progressing.

Expected diagnosis
    ``no-hang``: the process in the sleep wrote to disk and logged an advancing progress counter
    between the samples; the sleep is a throttle (``throttled-sleep``: its duration is computed,
    inside a loop that does work), not a poll on a condition nothing sets.
"""

import os
import random
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

import ray

EXPECTED = {
    "verdict": "no-hang",
    "pattern": None,
    "culprits": [],
    "ready": "saved chunk 3/600",
    "notes": "healthy: Trainer.fit uploads a checkpoint in 600 chunks of 256 KiB through a "
    "token-bucket RateLimiter at one chunk per second (~10 min). Stacks sit in time.sleep "
    "(RateLimiter.acquire) and the task table is frozen, but the worker writes 256 KiB/s and "
    "logs 'saved chunk N/600' every second.",
}


@dataclass
class UploadConfig:
    epochs: int = 3
    num_chunks: int = 600
    chunk_bytes: int = 256 * 1024
    bandwidth_bytes_per_s: float = 256 * 1024.0  # metered uplink: one chunk a second
    keep_chunks: int = 4  # the "bucket" keeps only the newest parts (bounded disk use here)
    seed: int = 7


class RateLimiter:
    """Token bucket: `acquire(n)` returns once `n` bytes may be sent at `rate` bytes/s."""

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = rate, burst
        self.tokens = burst
        self.stamp = time.monotonic()
        self.lock = threading.Lock()

    def acquire(self, nbytes: int) -> None:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            deficit = nbytes - self.tokens
            self.tokens -= nbytes
            if deficit > 0:
                time.sleep(deficit / self.rate)


@ray.remote(num_cpus=0.5)
class Trainer:
    def __init__(self, cfg: dict):
        self.cfg = UploadConfig(**cfg)
        self.rng = random.Random(self.cfg.seed)
        self.weights = [self.rng.gauss(0, 1) for _ in range(4096)]
        self.bucket = tempfile.mkdtemp(prefix="ckpt-bucket-")

    def _train_epoch(self, epoch: int) -> float:
        loss = 0.0
        for i, w in enumerate(self.weights):
            grad = w - 0.01 * (i % 7)
            self.weights[i] = w - 0.1 * grad
            loss += grad * grad
        return loss / len(self.weights)

    def _upload(self, blob: bytes) -> None:
        limiter = RateLimiter(self.cfg.bandwidth_bytes_per_s, burst=float(self.cfg.chunk_bytes))
        n = self.cfg.num_chunks
        for i in range(n):
            chunk = blob[(i * self.cfg.chunk_bytes) % len(blob):][: self.cfg.chunk_bytes].ljust(self.cfg.chunk_bytes, b"\0")
            limiter.acquire(len(chunk))
            path = os.path.join(self.bucket, f"part-{i:05d}")
            with open(path, "wb") as fh:
                fh.write(chunk)
                fh.flush()
                os.fsync(fh.fileno())
            old = os.path.join(self.bucket, f"part-{i - self.cfg.keep_chunks:05d}")
            if os.path.exists(old):
                os.remove(old)
            print(f"saved chunk {i + 1}/{n}", flush=True)

    def fit(self) -> str:
        for epoch in range(self.cfg.epochs):
            print(f"epoch {epoch}: loss {self._train_epoch(epoch):.4f}", flush=True)
        blob = b"".join(int(abs(w) * 1e6).to_bytes(8, "little") for w in self.weights) * 16
        print(f"uploading checkpoint: {self.cfg.num_chunks} chunks to {self.bucket}", flush=True)
        self._upload(blob)
        return self.bucket


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    cfg = UploadConfig()
    trainer = Trainer.remote(asdict(cfg))
    print("READY: Trainer.fit trains, then uploads its checkpoint (throttled, ~10 min)", flush=True)
    where = ray.get(trainer.fit.remote())
    print(f"checkpoint uploaded to {where}", flush=True)


if __name__ == "__main__":
    main()
