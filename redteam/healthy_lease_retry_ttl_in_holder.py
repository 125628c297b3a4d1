"""A retried task polls a lease its dead first attempt took; only the lease table knows the TTL (healthy).

Scenario: the twin of healthy_lease_retry_ttl_early whose poll holds no expiry. A LeaseTable actor
hands out leases that expire: `try_acquire(key, owner, ttl_s)` grants a free, expired or own lease
(recording `(owner, time.time() + ttl_s)`) and answers only True or False. `compact_table`
(max_retries=2) takes the lease with a fresh owner token per attempt and a 120 s TTL; its first
attempt's worker dies right after taking it (os._exit: an OOM kill). The retry polls every second,
`while not ray.get(table.try_acquire.remote(...)): time.sleep(1.0)`, and gets the lease once the dead
attempt's TTL runs out, then compacts for about 4 minutes and releases it.

Mechanism: a poll for a lease held on behalf of a dead holder, whose expiry lives only in the polled
actor's state: the polled method's answer is computed from the clock (`now >= expires_at`), so it
turns true by time alone. Nothing in the poll's frame shows when.
Truth: healthy - the wait ends when the lease expires (~2 min after the start). Not a hang:
inconclusive at most (the polled method's answer depends on the clock: a TTL may end it), never
"hang".
"""
# redteam-settle: 10
import os
import time
import uuid

import ray

TTL_S = 120.0


@ray.remote(num_cpus=0.25)
class LeaseTable:
    def __init__(self):
        self.leases = {}  # key -> (owner, expires_at)

    def try_acquire(self, key, owner, ttl_s):
        now = time.time()
        holder, expires_at = self.leases.get(key, (None, 0.0))
        if holder is None or holder == owner or now >= expires_at:
            self.leases[key] = (owner, now + ttl_s)
            return True
        return False

    def release(self, key, owner):
        if self.leases.get(key, (None,))[0] == owner:
            del self.leases[key]


def write_rows(path, seconds):
    """The long write: a row appended every 0.2 s, a progress line every 100 rows."""
    end, rows = time.time() + seconds, 0
    with open(path, "a") as fh:
        while time.time() < end:
            fh.write(f"row {rows}\n")
            fh.flush()
            rows += 1
            if rows % 100 == 0:
                print(f"wrote {rows} rows", flush=True)
            time.sleep(0.2)
    return rows


@ray.remote(num_cpus=0.25, max_retries=2, retry_exceptions=False)
def compact_table(table, key, marker):
    owner = f"compact-{uuid.uuid4().hex[:8]}"
    while not ray.get(table.try_acquire.remote(key, owner, TTL_S)):
        time.sleep(1.0)
    try:
        print(f"{owner}: lease on {key}; compacting", flush=True)
        if not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(1.0)
            os._exit(137)          # the first attempt's worker dies mid-write (OOM kill)
        write_rows(f"/tmp/redteam_lease_ttl_holder_{owner}.rows", 240.0)
        return f"{key} compacted by {owner}"
    finally:
        ray.get(table.release.remote(key, owner))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    table = LeaseTable.remote()
    marker = f"/tmp/redteam_lease_ttl_holder_{uuid.uuid4().hex[:6]}"
    ref = compact_table.remote(table, "events_2026_12", marker)
    time.sleep(8.0)  # the first attempt takes the lease and dies; its retry polls
    print("READY: driver -> compact_table (retry polls a lease its dead attempt took, TTL kept by the table)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
