"""Healthy: an actor derives per-shard encryption keys, each a single ~30-60 s native call, silently.

Scenario: KeyVault.derive_all derives one key per checkpoint shard with
hashlib.pbkdf2_hmac(..., iterations=25_000_000): one C call per shard (OpenSSL, GIL released),
tens of seconds each on this machine, no logging, no Ray calls. py-spy shows the same Python line
in every sample; only the call's CPU time and the shard counter (between calls) move.
Truth: no hang (a long native computation; the process uses a full CPU).
"""
# redteam-settle: 25
import hashlib
import os

import ray


@ray.remote(num_cpus=1)
class KeyVault:
    def derive_all(self, shards: int) -> list[str]:
        keys = []
        for shard in range(shards):
            salt = f"ckpt-shard-{shard}".encode()
            keys.append(hashlib.pbkdf2_hmac("sha256", b"run-secret", salt, 25_000_000).hex()[:8])
        return keys


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    v = KeyVault.remote()
    ref = v.derive_all.remote(8)
    print("READY deriving keys", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
