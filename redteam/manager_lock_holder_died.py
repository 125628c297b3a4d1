"""A multiprocessing.Manager lock acquired by a child that died: the actor waits on it forever.

Scenario: a ShardIndexer actor coordinates index writers with a `multiprocessing.Manager()` and a
manager `Lock()` (a proxy: the real lock lives in the manager's server process). A writer child
takes the lock and dies before releasing it (it hits a fatal error and leaves with `os._exit(1)`,
as a segfault or an OOM kill would). The manager never releases locks held on behalf of clients
that went away. `commit()` then does `with self.lock:` and its proxy call waits on the manager's
server thread, which waits in `acquire()` on a lock nobody alive holds. The driver waits in
`ray.get(indexer.commit.remote())`.

Mechanism: a lock whose holder is a dead process; the waiter's wait is relayed through a server
process (a socket read on the manager, whose thread sits in `lock.acquire`).
Truth: culprit the dead writer child (died holding the manager lock; nothing can release it);
the actor and the driver are victims. Fix: do not share a Manager lock with processes that can
die holding it (use a file lock released by the kernel on exit, or acquire(timeout=...) and
rebuild the lock when the holder is gone).
"""
import multiprocessing as mp
import os
import time

import ray


def writer(lock, shard: int) -> None:
    lock.acquire()
    print(f"writer {shard}: lock taken, writing", flush=True)
    time.sleep(1)
    os._exit(1)  # a fatal error in the writer: it never releases the lock


@ray.remote(num_cpus=0.1)
class ShardIndexer:
    def __init__(self) -> None:
        self.mgr = mp.Manager()
        self.lock = self.mgr.Lock()

    def write(self, shard: int) -> int:
        p = mp.Process(target=writer, args=(self.lock, shard))
        p.start()
        p.join()
        return p.exitcode

    def commit(self) -> str:
        with self.lock:
            return "committed"


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    indexer = ShardIndexer.remote()
    print("writer exit code:", ray.get(indexer.write.remote(0)), flush=True)
    print("READY: committing the index", flush=True)
    print(ray.get(indexer.commit.remote()), flush=True)


if __name__ == "__main__":
    main()
