"""A consumer reads a ray.util.queue.Queue that nobody feeds: the producer got another instance.

Scenario
    A helper ``make_queue()`` is called once for the producer and once for the consumer. The
    ``fill`` task puts 16 shards into its queue and finishes; a ``Trainer`` actor then reads 16
    items from its own queue; the driver waits on ``Trainer.consume``.

Mechanism
    The two calls made two ``_QueueActor``s. The Trainer's ``queue.get()`` is a ``ray.get`` on
    ``_QueueActor.get`` of the second one, which awaits an empty ``asyncio.Queue``. Nobody ever
    put into that actor, and nothing alive can: the driver waits on the Trainer, the Trainer on
    the queue, and ``fill`` finished, having written its 16 items into the other queue actor,
    which nobody reads.

What misleads
    Both queue actors are ALIVE and idle-looking (an event loop in ``select``); ``fill`` is
    FINISHED, so nothing failed. The consumer's stack says "waiting on an empty queue", which
    alone could be a slow producer.

Expected diagnosis
    ``producer-gone``: the Trainer waits on the queue actor its ``_QueueActor.get`` call goes to;
    that queue was never put into and no process of the job is free to; culprit ``fill``, which
    finished after putting its items into the other queue actor. Fix: create the queue once and
    pass the same handle to both sides; give ``queue.get`` a timeout.
"""

import os

import ray
from ray.util.queue import Queue

EXPECTED = {
    "verdict": "hang",
    "pattern": "producer-gone",
    "culprits": [{"class_name": "fill", "rank": None}],
    "notes": "two _QueueActors: fill put 16 items into one and finished; Trainer.consume waits on the "
    "other, which nobody ever put into and nobody alive can.",
}


def make_queue() -> Queue:
    return Queue(maxsize=64, actor_options={"num_cpus": 0})


@ray.remote(num_cpus=0.1)
def fill(queue: Queue, n: int) -> int:
    for i in range(n):
        queue.put({"shard": i})
    return n


@ray.remote(num_cpus=0.1)
class Trainer:
    def consume(self, queue: Queue, n: int) -> int:
        seen = 0
        for _ in range(n):
            queue.get()
            seen += 1
        return seen


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    produced_into, consumed_from = make_queue(), make_queue()
    print("filled", ray.get(fill.remote(produced_into, 16)), flush=True)
    trainer = Trainer.remote()
    done = trainer.consume.remote(consumed_from, 16)
    print("READY", flush=True)
    print(ray.get(done))


if __name__ == "__main__":
    main()
