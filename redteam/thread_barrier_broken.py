"""threading.Barrier across worker threads of one actor, one thread died before reaching it.

Mechanism: ShardWriter.write_all starts 3 threads; each writes its part and calls barrier.wait()
(parties=3, no timeout). Thread 2 raises (ZeroDivisionError) before the barrier. Threads 0,1 wait
forever in Barrier.wait (Condition.wait); the method's main thread waits in Thread.join.
Truth: culprit ShardWriter (a dead thread never arrives); fix: barrier timeout / barrier.abort()
in an except path.
"""
import os
import threading

import ray


@ray.remote(num_cpus=0.1)
class ShardWriter:
    def write_all(self, n_parts=3):
        barrier = threading.Barrier(n_parts)
        sizes = [100, 200, 0]
        def part(i):
            chunk = 1000 // sizes[i]  # part 2 divides by zero and dies
            barrier.wait()
            return chunk
        ts = [threading.Thread(target=part, args=(i,), name=f"part-{i}") for i in range(n_parts)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return "ok"

def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    w = ShardWriter.remote()
    print("READY: driver -> ShardWriter.write_all (barrier of 3, one thread died)", flush=True)
    print(ray.get(w.write_all.remote()))

if __name__ == "__main__":
    main()
