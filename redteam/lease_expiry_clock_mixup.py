"""A retried task polls a lease whose recorded expiry passed long ago but is never honoured (hang).

Scenario: the same LeaseTable shape as healthy_lease_retry_ttl_early: leases recorded as
`(owner, time.time() + ttl_s)` and answered as `(False, holder, expires_at)`. But the table's
expiry test reads the other clock: `time.monotonic() >= expires_at` (seconds since boot, never
near a wall-clock epoch time), so an expired lease is never taken over. `compact_table`
(max_retries=2) takes the lease with a 10 s TTL and its first attempt's worker dies (os._exit);
the retry polls every second, logging "held by compact-… for another -N s", forever.

Mechanism: a poll for a lease held on behalf of a dead attempt; its recorded expiry (in the poll's
own loop state) is already well in the past and the poll still fails: the TTL will not free it.
Truth: hang — culprit the dead first attempt of compact_table (took the lease and died holding it);
the retry and the driver are victims. Fix: compare the expiry with the clock that wrote it
(time.time()), or owner token = task id, or release on owner death.
"""
# redteam-settle: 20
import os
import time
import uuid

import ray

TTL_S = 10.0


@ray.remote(num_cpus=0.25)
class LeaseTable:
    def __init__(self):
        self.leases = {}  # key -> (owner, expires_at)

    def try_acquire(self, key, owner, ttl_s):
        holder, expires_at = self.leases.get(key, (None, 0.0))
        if holder is None or holder == owner or time.monotonic() >= expires_at:
            self.leases[key] = (owner, time.time() + ttl_s)
            return True, owner, time.time() + ttl_s
        return False, holder, expires_at

    def release(self, key, owner):
        if self.leases.get(key, (None,))[0] == owner:
            del self.leases[key]


@ray.remote(num_cpus=0.25, max_retries=2, retry_exceptions=False)
def compact_table(table, key, marker):
    owner = f"compact-{uuid.uuid4().hex[:8]}"
    while True:
        granted, holder, expires_at = ray.get(table.try_acquire.remote(key, owner, TTL_S))
        if granted:
            break
        print(f"{owner}: {key} busy, held by {holder} for another {expires_at - time.time():.0f}s; retrying",
              flush=True)
        time.sleep(1.0)
    try:
        print(f"{owner}: lease on {key}; compacting", flush=True)
        if not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(1.0)
            os._exit(137)          # the first attempt's worker dies mid-write (OOM kill)
        time.sleep(2.0)
        return f"{key} compacted by {owner}"
    finally:
        ray.get(table.release.remote(key, owner))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    table = LeaseTable.remote()
    marker = f"/tmp/redteam_lease_clock_{uuid.uuid4().hex[:6]}"
    ref = compact_table.remote(table, "events_2026_12", marker)
    time.sleep(8.0)
    print("READY: driver -> compact_table (retry polls a lease whose expiry passed but is never honoured)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
