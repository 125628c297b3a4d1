"""Two shard actors each hold their own lock across a ray.get into the other.

Scenario
    A sharded parameter store: two ``Shard`` actors (threaded, ``max_concurrency=4``) each guard
    their table with a ``threading.Lock``. ``rebalance(keys)`` moves keys to the peer shard: it
    takes its own lock, removes the keys, and calls ``ray.get(peer.accept.remote(keys))`` while
    still holding the lock; ``accept`` takes the peer's lock to insert them.

Mechanism
    The driver rebalances both shards at once (each sends its hot keys to the other). Shard A
    holds A's lock and waits in ``ray.get`` for ``B.accept``; B holds B's lock and waits for
    ``A.accept``; each ``accept`` runs in a second thread of its actor and waits at
    ``with self.lock:`` for the lock its own actor's ``rebalance`` holds. A cycle of two actors,
    each with one thread in ``ray.get`` and one at a lock line; no error.

What misleads
    Both Shards are in ``ray.get`` on each other's ``accept``, which looks like a slow peer or
    an actor call cycle. Wrong: each ``accept`` RUNS in a second thread and waits at ``with
    self.lock:`` for the lock its own actor's ``rebalance`` holds across the remote call - a
    lock-order deadlock spanning two processes.

Expected diagnosis
    ``lock-order-deadlock``: the cycle Shard → Shard through ``accept``, with each shard's
    ``accept`` thread waiting at ``with self.lock:`` (a lock held across a remote call). Fix:
    release the lock before calling the peer.
"""

import os
import threading
import time

import ray

EXPECTED = {
    "verdict": "hang",
    "pattern": "lock-order-deadlock",
    "culprits": [{"class_name": "Shard", "rank": None}],
    "notes": "each Shard holds its lock across ray.get(peer.accept); accept waits for that lock on "
    "the peer: a cross-actor lock-order cycle.",
}


@ray.remote(num_cpus=0.25, max_concurrency=4)
class Shard:
    def __init__(self, name: str, keys: dict):
        self.name = name
        self.table = dict(keys)
        self.lock = threading.Lock()
        self.peer = None

    def set_peer(self, peer) -> None:
        self.peer = peer

    def accept(self, items: dict) -> int:
        with self.lock:
            self.table.update(items)
            return len(self.table)

    def rebalance(self, hot_keys: list) -> int:
        with self.lock:
            moving = {k: self.table.pop(k) for k in hot_keys if k in self.table}
            time.sleep(0.5)  # serialising the moved rows
            return ray.get(self.peer.accept.remote(moving))


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    a = Shard.options(name="shard_a").remote("a", {f"a{i}": i for i in range(8)})
    b = Shard.options(name="shard_b").remote("b", {f"b{i}": i for i in range(8)})
    ray.get([a.set_peer.remote(b), b.set_peer.remote(a)])
    print("READY: rebalancing both shards", flush=True)
    print(ray.get([a.rebalance.remote(["a1", "a2"]), b.rebalance.remote(["b3"])]), flush=True)


if __name__ == "__main__":
    main()
