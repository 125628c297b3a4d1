"""A healthy export task that writes to disk quietly: no log line, no finished task, just bytes.

Scenario
    An ``export_shard`` task streams a generated dataset shard to local disk (a directory
    standing in for a scratch volume) in 64 KiB records, pacing itself with a fixed
    ``time.sleep(0.2)`` between records so as not to starve the node's other I/O. 3,000
    records take ten minutes. It prints nothing until it is done. The driver waits in
    ``ray.get``.

Mechanism
    Nothing is wrong. The task table is frozen (one RUNNING task for ten minutes), nothing is
    logged, and every stack sample shows the task in ``time.sleep`` with a constant argument
    inside a loop: exactly how a poll on a condition that never comes looks. Only the disk
    shows progress: the process writes about 320 KiB a second.

What misleads
    The export task neither logs nor finishes within the window, and its stack sits in the same
    function twice: a silent hang is the tempting reading. Wrong: its write bytes in
    ``/proc/PID/io`` grow steadily between the samples; disk progress alone keeps it out of ``hang``.

Expected diagnosis
    ``no-hang`` (or at worst ``inconclusive``): the process in the sleep loop wrote to disk
    between the samples. A tool that reads the stacks and the task table alone calls it a
    ``poll-never-satisfied`` hang.
"""

import os
import tempfile
import time

import ray

EXPECTED = {
    "verdict": "no-hang",
    "pattern": None,
    "culprits": [],
    "notes": "healthy: export_shard writes a 64 KiB record every 0.2 s (~320 KiB/s) for ~10 "
    "min and logs nothing; the stacks sit in time.sleep(0.2) in a loop, the task table is "
    "frozen: only /proc/PID/io write bytes show that it moves.",
}

RECORD_BYTES = 64 * 1024
NUM_RECORDS = 3000
KEEP_FILES = 4  # bounded disk use here: older part files are removed


@ray.remote(num_cpus=0.5)
def export_shard(shard: int) -> int:
    out_dir = tempfile.mkdtemp(prefix=f"export-{shard}-")
    record = bytes(range(256)) * (RECORD_BYTES // 256)
    written = 0
    for i in range(NUM_RECORDS):
        part = os.path.join(out_dir, f"part-{i // 50:04d}")
        with open(part, "ab") as fh:
            fh.write(record)
            fh.flush()
            os.fsync(fh.fileno())
        written += len(record)
        stale = os.path.join(out_dir, f"part-{i // 50 - KEEP_FILES:04d}")
        if i % 50 == 0 and os.path.exists(stale):
            os.remove(stale)
        time.sleep(0.2)
    return written


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = export_shard.remote(0)
    print("READY: export_shard streams its shard to disk (quietly, ~10 min)", flush=True)
    print(f"exported {ray.get(ref)} bytes", flush=True)


if __name__ == "__main__":
    main()
