"""Benchmark task waits on a node-wide POSIX semaphore whose holder died: a native wait via ctypes.

Scenario: jobs on a shared node serialise access to the accelerator through a named POSIX
semaphore ("one process on the device at a time"), opened and taken through ctypes
(sem_open / sem_wait in libc) by a tiny DeviceSlot helper. A Profiler actor takes the slot, then
its process dies (a native crash; here os._exit) without sem_post -- a POSIX semaphore is not
released when its holder dies. The Benchmark task then waits in sem_wait (a C call, GIL released:
py-spy shows the Python line of the ctypes call, idle) forever; the driver waits in ray.get.

Mechanism: a leaked cross-process native semaphore (a lock in a C library via ctypes) whose
holder is a dead process of the same job (DEAD actor, WORKER_DIED).
Truth: culprit the dead Profiler actor (took the device slot and died holding it); the Benchmark
task is the victim. Fix: a lock released on process death (fcntl/flock on a file, a robust
mutex), or sem_timedwait with a stale-holder check.
"""
import ctypes
import ctypes.util
import os
import time

import ray

O_CREAT = 0o100


class DeviceSlot:
    def __init__(self, name: str):
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.libc.sem_open.restype = ctypes.c_void_p
        self.libc.sem_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint]
        self.libc.sem_wait.argtypes = [ctypes.c_void_p]
        self.libc.sem_post.argtypes = [ctypes.c_void_p]
        self.sem = self.libc.sem_open(name.encode(), O_CREAT, 0o600, 1)

    def acquire(self) -> None:
        if self.libc.sem_wait(self.sem) != 0:
            raise OSError(ctypes.get_errno(), "sem_wait")

    def release(self) -> None:
        self.libc.sem_post(self.sem)


@ray.remote(num_cpus=0.1)
class Profiler:
    def profile(self, slot_name: str) -> None:
        slot = DeviceSlot(slot_name)
        slot.acquire()
        time.sleep(0.5)
        os._exit(1)  # the profiler segfaults in the vendor library while holding the slot


@ray.remote(num_cpus=0.5)
def benchmark(slot_name: str, iters: int) -> float:
    slot = DeviceSlot(slot_name)
    slot.acquire()
    try:
        t0 = time.perf_counter()
        sum(i * i for i in range(iters))
        return time.perf_counter() - t0
    finally:
        slot.release()


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    slot_name = f"/device-slot-{os.getpid()}"
    profiler = Profiler.remote()
    try:
        ray.get(profiler.profile.remote(slot_name))
    except ray.exceptions.RayActorError:
        print("profiler crashed; continuing with the benchmark", flush=True)
    ref = benchmark.remote(slot_name, 1_000_000)
    print("READY benchmark submitted", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
