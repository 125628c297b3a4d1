"""A storage auditor that walks a bucket listing slowly (rate-limited), logging nothing.

Scenario: BucketAuditor.audit() checks 1500 object keys against their manifest entries. The
storage API allows ~5 requests a second, so each key costs a 0.2 s sleep plus a checksum;
mismatches are collected in memory and reported at the end (after ~5 min). Nothing is printed,
nothing is written, no Ray task finishes meanwhile; the driver waits in ray.get.

Mechanism: none -- a slow but advancing loop with no logs. Any single stack sample shows the
actor idle in time.sleep; between samples the loop index (`i`, `checked`) advances.
Truth: NOT hung. Expected no-hang or inconclusive, never hang.
"""
# redteam-settle: 25
import hashlib
import os
import time

import ray


@ray.remote(num_cpus=0.1)
class BucketAuditor:
    def __init__(self, requests_per_s: float = 5.0):
        self.interval = 1.0 / requests_per_s
        self.mismatches: list[str] = []

    def _head_object(self, key: str) -> str:
        time.sleep(self.interval)  # rate limit of the storage API
        return hashlib.sha256(key.encode()).hexdigest()

    def audit(self, manifest: dict[str, str]) -> dict[str, int]:
        checked = 0
        for i, (key, expected) in enumerate(manifest.items()):
            if self._head_object(key) != expected:
                self.mismatches.append(key)
            checked = i + 1
        return {"checked": checked, "mismatches": len(self.mismatches)}


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    manifest = {f"shards/{i:05d}.parquet": hashlib.sha256(f"shards/{i:05d}.parquet".encode()).hexdigest()
                for i in range(1500)}
    manifest["shards/00042.parquet"] = "0" * 32
    auditor = BucketAuditor.remote()
    ref = auditor.audit.remote(manifest)
    print("READY auditing 1500 objects", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
