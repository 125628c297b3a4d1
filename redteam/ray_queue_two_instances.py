"""A consumer reads a ray.util.queue.Queue that nobody feeds: the producer got another instance.

Mechanism: a helper `make_queue()` is called once for the producer and once for the consumer, so
they hold two different Queue actors. The `fill` task puts 16 shards into its queue and FINISHES;
the Trainer actor blocks in `queue.get()` (ray.util.queue: a `ray.get` on its _QueueActor's
async get, which awaits an empty asyncio.Queue) on the other, empty one, and the driver waits on
Trainer.consume. Nothing alive can put into the consumer's queue.
Truth: hang; the Trainer waits on an empty queue whose producer is gone (it finished, having
written elsewhere): culprit the missing producer of that queue (the finished `fill` / the wiring),
not the Trainer's or the queue actor's code. Fix: create the queue once and pass the same handle
to both sides; give queue.get a timeout.
"""
import os

import ray
from ray.util.queue import Queue


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
