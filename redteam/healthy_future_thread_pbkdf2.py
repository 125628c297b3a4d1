"""Healthy: an actor's method waits on a Future whose pool thread runs one multi-minute native call.

Scenario: a SecretsWrapper actor derives the key that encrypts a checkpoint before upload. It hands
the derivation to a ThreadPoolExecutor (to keep a heartbeat thread free) and waits in
`fut.result()`. The job is one `hashlib.pbkdf2_hmac("sha256", ..., iterations=400_000_000)` call:
a single C call in OpenSSL (GIL released), ~2-4 minutes here, silent.
Mechanism: the actor's main thread is idle in `Future.result` → `Condition.wait`; the pool thread's
Python stack never moves (one frame at the pbkdf2 line, in C), but it burns a full CPU. Nothing is
logged, no Ray call is pending besides the driver's ray.get.
Truth: healthy (no culprit): the derivation finishes and `wrap` returns. A hang verdict is wrong
(the working thread is the pool thread in pbkdf2_hmac).
"""
# redteam-settle: 25
import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import ray


def derive(secret: bytes, salt: bytes) -> str:
    return hashlib.pbkdf2_hmac("sha256", secret, salt, 400_000_000).hex()


@ray.remote(num_cpus=1)
class SecretsWrapper:
    def __init__(self):
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kdf")

    def wrap(self, ckpt: str) -> str:
        fut = self.pool.submit(derive, b"run-secret", ckpt.encode())
        key = fut.result()
        return f"{ckpt}: key {key[:8]}"


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = SecretsWrapper.remote()
    ref = w.wrap.remote("ckpt-000120")
    print("READY: driver -> SecretsWrapper.wrap (Future.result on a pool thread in pbkdf2_hmac)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
