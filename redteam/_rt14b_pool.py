"""Helper module of healthy_process_pool_rebuilt.py (a process pool pickles its function by name)."""
import os


def score(shard, n, flag):
    if shard == 1 and not os.path.exists(flag):
        open(flag, "w").close()
        os._exit(3)  # the worker dies as an OOM kill would: the pool breaks
    h = shard
    for i in range(n):
        h = (h * 1103515245 + i) & 0x7FFFFFFF
    return shard, h
