"""Healthy: one thread holds a lock through a slow chunked upload that sleeps between chunks.

Scenario: a CheckpointSink actor writes checkpoints "to object storage": `upload()` takes
`self._lock` and sends 12 chunks, sleeping 15 s between them (a rate limit imposed by the store),
logging every chunk. A second call, `status()`, from a monitor task, needs the same lock and
waits. The holder is in `time.sleep` most of the time, so a one-second window shows a lock
owner that sleeps and a waiter at `acquire()`.

Mechanism: a lock held across a paced loop whose state advances (chunk counter) with each round;
the waiter is released when the upload ends (~3 min), then the next upload begins.
Truth: no hang (slow, paced I/O under a lock). `no-hang` or `inconclusive` are right, `hang` is wrong.
"""
import os
import threading
import time

import ray


@ray.remote(num_cpus=0.1, max_concurrency=4)
class CheckpointSink:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.uploaded = 0

    def upload(self, name: str, chunks: int = 12) -> int:
        with self._lock:
            for i in range(chunks):
                time.sleep(15)  # the store's rate limit between chunks
                print(f"{name}: chunk {i + 1}/{chunks} sent", flush=True)
            self.uploaded += 1
        return self.uploaded

    def status(self) -> int:
        with self._lock:
            return self.uploaded


@ray.remote(num_cpus=0.1)
def monitor(sink) -> int:
    return ray.get(sink.status.remote())


def main() -> None:
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    sink = CheckpointSink.remote()
    print("READY: chunked uploads under a lock, 15 s between chunks", flush=True)
    for step in range(4):
        up = sink.upload.remote(f"ckpt-{step}")
        time.sleep(2)
        print("monitor:", ray.get(monitor.remote(sink)), flush=True)
        ray.get(up)


if __name__ == "__main__":
    main()
