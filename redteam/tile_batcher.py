"""A bounded queue.Queue filled and drained by the same thread: put() blocks once it is full.

Scenario: TileBatcher.render_all() renders 20 map tiles and stages them in a
`queue.Queue(maxsize=8)` ("bounded, so staging never takes too much memory"), meaning to drain the
queue afterwards. The same thread is the producer and the only consumer: the 9th `q.put(tile)`
blocks until someone gets -- nobody else ever will. The actor has no other thread.
Mechanism: a bounded queue whose producer is its own consumer (self-deadlock on Queue.put).
Truth: hang; culprit TileBatcher, `render_all`'s `q.put(tile)` (line 29); fix: drain while producing
(a consumer thread) or an unbounded queue/list.
Driver in ray.get(render_all).
"""
import os
import queue
import time

import ray


def render(i):
    return bytes([i % 256]) * 4096


@ray.remote(num_cpus=0.1)
class TileBatcher:
    def render_all(self, n):
        q = queue.Queue(maxsize=8)
        for i in range(n):
            tile = render(i)
            q.put(tile)
        out = []
        while not q.empty():
            out.append(q.get())
        return len(out)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    b = TileBatcher.remote()
    ref = b.render_all.remote(20)
    time.sleep(2)
    print("READY: driver -> TileBatcher.render_all (put on its own full queue)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
