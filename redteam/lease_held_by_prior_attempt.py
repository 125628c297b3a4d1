"""A retried task waits for a lease that its own first attempt took before its worker died.

Scenario: jobs serialise writes to a shared table through a LeaseServer actor ("one writer per
table"): `try_acquire(table, owner)` grants the lease when it is free and records the owner token;
`release(table, owner)` frees it. There is no TTL ("writers always release in finally"). The
`compact_table` task (max_retries=2, so that a preempted worker is retried) makes a fresh owner
token per attempt (`f"compact-{uuid4()}"`), takes the lease and starts writing; its first attempt's
worker dies mid-write (a native crash / OOM kill; here os._exit) — the `finally` never runs. Ray
retries the task. The second attempt, with a new token, polls try_acquire every second and logs
"table busy, held by compact-…" forever: the holder is its own dead first attempt.

Mechanism: a resource (an application lease kept in an actor's state) held on behalf of a task
attempt that died; the waiter is the retry of that same task, polling; nothing can release it
(no TTL, the holder's process is gone).
Truth: culprit the first attempt of compact_table (took the lease and died holding it; its failed
attempt is in the task's history, WORKER_DIED / retried); the retry and the driver are victims.
Fix: leases with a TTL/heartbeat, or owner token = the task id (stable across retries), or release
on owner death.
"""
# redteam-settle: 20
import os
import time
import uuid

import ray


@ray.remote(num_cpus=0.5)
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


@ray.remote(num_cpus=1, max_retries=2, retry_exceptions=False)
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
        time.sleep(2.0)
        return f"{table} compacted by {owner}"
    finally:
        ray.get(server.release.remote(table, owner))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    server = LeaseServer.remote()
    marker = f"/tmp/redteam9_lease_{uuid.uuid4().hex[:6]}"
    ref = compact_table.remote(server, "events_2026_12", marker)
    print("READY: driver -> compact_table (retry polls a lease its dead first attempt holds)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
