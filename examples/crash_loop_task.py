"""A task retried forever that segfaults in native code on every attempt.

Scenario
    The driver decodes a batch of compressed records with a ``decode_batch`` task. Decoding
    goes through a small native helper (``ctypes``) that reads each record's header from a
    pointer in the record table. Because workers can be preempted, the task is submitted with
    ``max_retries=-1``, and the driver waits in ``ray.get``.

Mechanism
    One record is empty and the table builder stored its pointer as a "missing" marker (a
    negative number: the top of the address space, as an unsigned pointer) instead of skipping it, so
    ``ctypes.string_at`` reads kernel memory and the worker dies of SIGSEGV ("Fatal Python
    error: Segmentation fault" in its log). Ray counts a dead worker as a system failure and
    retries the task on a fresh worker, which dies the same way, forever: attempts pile up as
    FAILED with ``WORKER_DIED``, the current attempt is pending or running, and the driver never
    sees an error.

What misleads
    The task is pending or running again each time you look, so the job seems to be still
    starting or merely slow. Wrong: its attempts keep FAILING with worker deaths (a segfault in
    native code) and ``max_retries=-1`` retries it forever; bound the retries and fix the crash.

Expected diagnosis
    ``crash-loop``: culprit the task ``decode_batch``, N attempts died (the death reason quoted
    from a dead worker's log: a segmentation fault). Fix: bound ``max_retries`` so the failure
    reaches the driver, and skip empty records (never pass a marker value to native code as a pointer).
"""

import ctypes
import os

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "crash-loop",
    "culprits": [{"class_name": "decode_batch", "rank": None}],
    # the first death (Ray forwards the dead worker's fatal error to the driver log), so that
    # the diagnosis sees the retries that follow
    "ready": "Fatal Python error: Segmentation fault",
    "notes": "decode_batch (max_retries=-1) reads a record header through an invalid pointer "
    "(a 'missing' marker, via ctypes.string_at): SIGSEGV on every attempt; Ray retries it "
    "forever on fresh workers; the driver waits in ray.get.",
}


def record_table(n: int) -> list[tuple[int, int]]:
    """(address, length) of each record; record 3 is empty: its address is the "missing" marker,
    which as an unsigned pointer is the top of the address space (kernel memory)."""
    buffers = [ctypes.create_string_buffer(b"REC%05d" % i + b"\0" * 8) for i in range(n)]
    table = [(ctypes.addressof(b), 16) for b in buffers]
    table[3] = (-4096 % 2**64, 16)  # the "missing" marker, as an unsigned pointer
    record_table.keep = buffers  # type: ignore[attr-defined]  # keep the buffers alive
    return table


@ray.remote(num_cpus=0.25, max_retries=-1)
def decode_batch(n: int) -> int:
    total = 0
    for address, length in record_table(n):
        header = ctypes.string_at(address, length)  # SIGSEGV on the empty record
        total += len(header.rstrip(b"\0"))
    return total


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    ref = decode_batch.remote(8)
    print("READY: driver waits for decode_batch (its worker dies and it is retried)", flush=True)
    print(f"decoded {ray.get(ref)} header bytes", flush=True)


if __name__ == "__main__":
    main()
