"""Helper module of healthy_slow_plugin_import.py: loads its shards through a pool when first imported."""
import time
from concurrent.futures import ThreadPoolExecutor

_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="shard-load")


def _load(shard: int) -> int:
    deadline = time.time() + 90
    while time.time() < deadline:  # a slow download, one chunk a second
        time.sleep(1.0)
    return shard


SHARDS = list(_POOL.map(_load, range(2)))


def lookup(key: str) -> int:
    return len(key) % max(1, len(SHARDS))
