"""An actor restarted forever that dies on every call: a crash loop, not a job "still starting".

Scenario
    A ``ShardReader`` actor serves training batches from a memory-mapped shard index. It is
    made "fault tolerant" the usual way: ``max_restarts=-1`` and ``max_task_retries=-1``, so
    that a lost node or a preempted worker never fails the run. The driver asks it for the
    first batch and waits in ``ray.get``.

Mechanism
    ``read_batch`` maps the index file, then refreshes it in place (``open(path, "wb")``
    truncates the file under the live mapping) and reads the mapped header: the pages behind
    the mapping no longer exist and the process dies of SIGBUS inside the mmap copy ("Fatal
    Python error: Bus error" in its worker log). Ray restarts the actor (``num_restarts``
    climbs, the state cycles RESTARTING -> ALIVE) and retries the call on the new process
    (earlier attempts FAILED with ``ACTOR_UNAVAILABLE`` / ``ACTOR_DIED``), which dies the same
    way, forever. The driver's ``ray.get`` never returns, and no error ever reaches it.

What misleads
    Caught between restarts the actor is RESTARTING (looks like "still starting"), caught alive it
    is idle (looks like an actor nobody calls). Wrong: ``num_restarts`` climbs and every call
    ends in a worker death; the reason (a fatal signal) is only in the dead workers' ``.err``
    logs. Fix the crash and bound ``max_restarts``/``max_task_retries``.

Expected diagnosis
    ``crash-loop``: culprit ``ShardReader``, restarted N times, each attempt killed by the same
    fatal signal (the death reason quoted from ``death_cause`` or its worker log). The driver
    waits on it. Fix: bound ``max_restarts`` / ``max_task_retries`` so the error surfaces, and
    fix the crash (never truncate a file that is mapped).
"""

import mmap
import os
import tempfile
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "crash-loop",
    "culprits": [{"class_name": "ShardReader", "rank": None}],
    "notes": "ShardReader (max_restarts=-1, max_task_retries=-1) truncates its mmapped index "
    "file and reads the mapping: SIGBUS on every call ('Fatal Python error: Bus error'); Ray "
    "restarts it and retries the call forever; the driver waits in ray.get.",
}

INDEX_RECORDS = 4096
RECORD_BYTES = 16


@ray.remote(num_cpus=0.25, max_restarts=-1, max_task_retries=-1)
class ShardReader:
    def __init__(self, shard_dir: str):
        self.index_path = os.path.join(shard_dir, "index.bin")
        if not os.path.exists(self.index_path) or os.path.getsize(self.index_path) < RECORD_BYTES:
            with open(self.index_path, "wb") as fh:
                fh.write(os.urandom(INDEX_RECORDS * RECORD_BYTES))

    def _refresh_index(self) -> None:
        # Rewrites the index in place: "wb" truncates the file first, under any live mapping.
        with open(self.index_path, "wb") as fh:
            fh.write(b"")

    def read_batch(self, batch: int) -> bytes:
        with open(self.index_path, "rb") as fh:
            index = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        self._refresh_index()
        header = index[:RECORD_BYTES]  # SIGBUS: the pages behind the mapping are gone
        return header * batch


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    shard_dir = tempfile.mkdtemp(prefix="shards-")
    reader = ShardReader.remote(shard_dir)
    print("READY: driver waits for ShardReader.read_batch (the reader dies and restarts)", flush=True)
    start = time.time()
    batch = ray.get(reader.read_batch.remote(32))
    print(f"first batch after {time.time() - start:.1f}s: {len(batch)} bytes", flush=True)


if __name__ == "__main__":
    main()
