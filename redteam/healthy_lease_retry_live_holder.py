"""A retried task polls a lease that a live other task holds and releases after a while (healthy).

Scenario: the same LeaseServer as lease_held_by_prior_attempt ("one writer per table", no TTL).
A `writer` task takes the lease on the table first and works for about 4 minutes (a long write,
a row appended to a file every 0.2 s), then releases it in `finally`. `compact_table` (max_retries=2) polls try_acquire
every second and logs "busy, held by writer-…"; its first attempt's worker dies while polling
(os._exit: an OOM kill), Ray retries it, and the retry polls the same live holder.

Mechanism: a poll for a resource held by a live process of the job that will release it; the
dead first attempt never held anything (it was polling too).
Truth: healthy — the writer releases at ~4 min and the retry takes the lease and finishes.
Not a hang; the retry and the writer are no culprits (inconclusive at most, never "hang").
"""
# redteam-settle: 25
import os
import time
import uuid

import ray


@ray.remote(num_cpus=0.25)
class LeaseServer:
    def __init__(self):
        self.leases = {}

    def try_acquire(self, table, owner):
        if self.leases.get(table) in (None, owner):
            self.leases[table] = owner
            return None
        return self.leases[table]

    def release(self, table, owner):
        if self.leases.get(table) == owner:
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


@ray.remote(num_cpus=0.25)
def writer(server, table, seconds):
    owner = f"writer-{uuid.uuid4().hex[:8]}"
    assert ray.get(server.try_acquire.remote(table, owner)) is None
    try:
        print(f"{owner}: lease on {table}; writing for {seconds:.0f}s", flush=True)
        write_rows(f"/tmp/redteam_lease_live_{owner}.rows", seconds)
        return owner
    finally:
        ray.get(server.release.remote(table, owner))


@ray.remote(num_cpus=0.25, max_retries=2, retry_exceptions=False)
def compact_table(server, table, marker):
    owner = f"compact-{uuid.uuid4().hex[:8]}"
    rounds = 0
    while True:
        holder = ray.get(server.try_acquire.remote(table, owner))
        if holder is None:
            break
        print(f"{owner}: table {table} busy, held by {holder}; retrying", flush=True)
        rounds += 1
        if rounds == 3 and not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(137)          # the first attempt's worker dies while polling (OOM kill)
        time.sleep(1.0)
    try:
        print(f"{owner}: lease on {table}; compacting", flush=True)
        time.sleep(2.0)
        return f"{table} compacted by {owner}"
    finally:
        ray.get(server.release.remote(table, owner))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    server = LeaseServer.remote()
    marker = f"/tmp/redteam_lease_live_{uuid.uuid4().hex[:6]}"
    held = writer.remote(server, "events_2026_12", 240.0)
    time.sleep(2.0)
    ref = compact_table.remote(server, "events_2026_12", marker)
    print("READY: driver -> compact_table (retry polls a lease a live writer holds for 4 min)", flush=True)
    print(ray.get([held, ref]))


if __name__ == "__main__":
    main()
