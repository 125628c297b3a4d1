"""Buffer leases are released by finalizers; the objects sit in reference cycles and gc is disabled.

Scenario: Encoder keeps two staging buffers and hands them out as Lease objects; a lease gives
its permit back through `weakref.finalize(lease, pool.release)` ("freed when the caller drops
it"). A Lease holds a list of callbacks that includes one of its own bound methods — a reference
cycle — so dropping it never frees it by refcount. Encoder.__init__ calls `gc.disable()` to avoid
collection pauses during encoding. The first two encode() calls return; the third waits in
`Semaphore.acquire` forever: the two leases are unreachable garbage that no collection will free.

Mechanism: a wait whose release depends on garbage collection (a finalizer on an object in a
reference cycle) while the collector is disabled.
Truth: culprit Encoder (its leases are freed only by gc, which it disabled; waiter at
`self.slots.acquire()` in `lease`); the driver is a victim. Fix: release explicitly (context
manager), break the cycle, or keep gc enabled.
"""
import gc
import os
import threading
import weakref

import ray


class Lease:
    def __init__(self, buf: bytearray):
        self.buf = buf
        self.callbacks = [self.log_done]

    def log_done(self) -> None:
        pass


class BufferPool:
    def __init__(self, n: int, size: int):
        self.slots = threading.Semaphore(n)
        self.size = size

    def lease(self) -> Lease:
        self.slots.acquire()
        lease = Lease(bytearray(self.size))
        weakref.finalize(lease, self.slots.release)
        return lease


@ray.remote(num_cpus=0.1)
class Encoder:
    def __init__(self):
        gc.disable()
        self.pool = BufferPool(2, 1 << 16)

    def encode(self, text: str) -> int:
        lease = self.pool.lease()
        data = text.encode()
        lease.buf[: len(data)] = data
        return len(data)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    enc = Encoder.remote()
    print(ray.get([enc.encode.remote("first"), enc.encode.remote("second")]), flush=True)
    ref = enc.encode.remote("third")
    print("READY encoding", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
