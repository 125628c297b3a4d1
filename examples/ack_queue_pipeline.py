"""An uploader sends chunks through one bounded queue and reads the acknowledgements only afterwards.

Scenario
    A checkpoint uploader: a ``ChunkSender`` actor splits a checkpoint into 40 chunks and puts
    them into a ``ray.util.queue.Queue(maxsize=4)``; a ``ChunkWriter`` actor takes each chunk,
    "writes" it and puts an acknowledgement into a second ``Queue(maxsize=4)``. The sender means to
    check the acknowledgements once every chunk is sent. The driver waits for both.

Mechanism
    After four chunks the acknowledgement queue is full: nobody reads it yet, because the sender
    is still sending. The writer blocks in ``acks.put``, stops taking chunks, the chunk queue
    fills, and the sender blocks in ``chunks.put``. A loop through two bounded queues: sender →
    chunk queue (full) → writer (its only reader) → ack queue (full, never read) → sender (who
    feeds the writer, and would read the acks after its loop). No error, no CPU.

What misleads
    Both actors wait on ``Queue.put`` at 0 % CPU, as under ordinary back-pressure, and the two
    ``_QueueActor`` processes idle in their event loops: the processes that look stuck are Ray's
    queue actors, but nothing is wrong with them.

Expected diagnosis
    ``queue-cycle``: ChunkSender first (it puts every chunk before reading any ack), with the
    ChunkWriter; fix: read acknowledgements while sending, or an unbounded ack queue.
"""

import os

import ray
from ray.util.queue import Queue

EXPECTED = {
    "verdict": "hang",
    "pattern": "queue-cycle",
    "culprits": [{"class_name": "ChunkSender", "rank": None}, {"class_name": "ChunkWriter", "rank": None}],
    "notes": "two bounded ray.util.queue queues in a loop: the sender puts all 40 chunks before it reads an ack; "
    "the writer blocks on the full ack queue and stops taking chunks.",
}


@ray.remote(num_cpus=0.25)
class ChunkSender:
    def ready(self) -> bool:
        return True

    def send(self, chunks, acks, n: int) -> int:
        for i in range(n):
            chunks.put({"index": i, "payload": b"x" * 1024})
        confirmed = 0
        for _ in range(n):
            confirmed += acks.get()["ok"]
        return confirmed


@ray.remote(num_cpus=0.25)
class ChunkWriter:
    def ready(self) -> bool:
        return True

    def run(self, chunks, acks, n: int) -> int:
        for _ in range(n):
            chunk = chunks.get()
            acks.put({"index": chunk["index"], "ok": 1})
        return n


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    chunks = Queue(maxsize=4, actor_options={"num_cpus": 0.1})
    acks = Queue(maxsize=4, actor_options={"num_cpus": 0.1})
    sender, writer = ChunkSender.remote(), ChunkWriter.remote()
    ray.get([sender.ready.remote(), writer.ready.remote()])
    print(f"queues ready ({chunks.size()} and {acks.size()} items)", flush=True)
    done = [sender.send.remote(chunks, acks, 40), writer.run.remote(chunks, acks, 40)]
    print("READY: uploading 40 chunks", flush=True)
    print(f"uploaded: {ray.get(done)}", flush=True)


if __name__ == "__main__":
    main()
