"""The Ray job ray_worker_logs.py records: two `RayTrainWorker` actors block in a stdlib
`queue.Queue.get` nobody feeds; rank 1 also starts a `FlushWorker` thread whose socket connect to a
closed port raises (Python prints the thread's traceback to stderr). faulthandler is registered on
SIGUSR1 in each actor, so the recorder can make both print their stacks; Ray forwards actor stderr
to the driver with a `(RayTrainWorker pid=N)` prefix. The driver blocks in ray.get on both."""

import faulthandler
import os
import queue
import signal
import socket
import sys
import threading

import ray


def flush_metrics() -> None:
    with socket.create_connection(("127.0.0.1", 9), timeout=5):  # discard port: closed here
        pass


@ray.remote(num_cpus=0)
class RayTrainWorker:
    def __init__(self) -> None:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        self.inbox: queue.Queue[int] = queue.Queue()

    def pid(self) -> int:
        return os.getpid()

    def train(self, rank: int) -> int:
        if rank == 1:
            threading.Thread(target=flush_metrics, name="FlushWorker").start()
        return self.inbox.get()  # nobody puts: blocks forever


def main() -> None:
    ray.init()
    workers = [RayTrainWorker.remote() for _ in range(2)]
    print("PIDS", *ray.get([w.pid.remote() for w in workers]), flush=True)
    refs = [w.train.remote(rank) for rank, w in enumerate(workers)]
    ray.get(refs)


if __name__ == "__main__":
    main()
