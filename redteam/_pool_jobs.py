"""Helper module for mp_pool_worker_killed.py (a pool function must be importable by name)."""
import os
import signal
import time


def decode(i: int) -> int:
    time.sleep(0.1)
    if i == 5:
        os.kill(os.getpid(), signal.SIGKILL)  # stands in for the kernel OOM killer
    return i * i
