"""A retried task waits out the TTL of a lease its dead first attempt took, then works (healthy).

Scenario: a LeaseServer whose leases expire (TTL 15 s, "a holder that dies loses its lease").
`compact_table` (max_retries=2) takes the lease with a fresh owner token per attempt; its first
attempt's worker dies mid-write (os._exit). The retry polls try_acquire every second ("busy,
held by compact-…", the dead attempt's token) until the TTL expires, takes the lease and
compacts for about 4 minutes (a long write, a row appended to a file every 0.2 s), then releases it.

Mechanism: a resource held for a dead holder, released by its TTL; the poll ended.
Truth: healthy — the retry holds the lease and works; it finishes at ~4 min. Never "hang".
"""
# redteam-settle: 30
import os
import time
import uuid

import ray

TTL_S = 15.0


@ray.remote(num_cpus=0.25)
class LeaseServer:
    def __init__(self):
        self.leases = {}

    def try_acquire(self, table, owner):
        held = self.leases.get(table)
        if held is None or held[0] == owner or time.time() - held[1] > TTL_S:
            self.leases[table] = (owner, time.time())
            return None
        return held[0]

    def release(self, table, owner):
        if self.leases.get(table, (None,))[0] == owner:
            del self.leases[table]


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
def compact_table(server, table, marker):
    owner = f"compact-{uuid.uuid4().hex[:8]}"
    while True:
        holder = ray.get(server.try_acquire.remote(table, owner))
        if holder is None:
            break
        print(f"{owner}: table {table} busy, held by {holder}; retrying", flush=True)
        time.sleep(1.0)
    try:
        print(f"{owner}: lease on {table}; compacting", flush=True)
        if not os.path.exists(marker):
            open(marker, "w").close()
            time.sleep(1.0)
            os._exit(137)          # the first attempt's worker dies mid-write (OOM kill)
        write_rows(f"/tmp/redteam_lease_ttl_{owner}.rows", 240.0)
        return f"{table} compacted by {owner}"
    finally:
        ray.get(server.release.remote(table, owner))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    server = LeaseServer.remote()
    marker = f"/tmp/redteam_lease_ttl_{uuid.uuid4().hex[:6]}"
    ref = compact_table.remote(server, "events_2026_12", marker)
    print("READY: driver -> compact_table (retry waits out its dead attempt's lease TTL, then works)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
