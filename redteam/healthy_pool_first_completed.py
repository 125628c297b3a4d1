"""Healthy: an actor waits in concurrent.futures.wait(FIRST_COMPLETED) on pool threads doing long pure-Python work.

Scenario: Scorer.score_all hands 3 shards to a ThreadPoolExecutor(3) and collects them with
`wait(pending, return_when=FIRST_COMPLETED)` in a loop, logging each finished shard. Each shard is a
pure-Python n-gram count over a synthetic corpus of a different size: the first finishes after ~1-2
minutes (on a loaded machine), the others later; nothing is logged in between.
Mechanism: the actor's main thread is in `Condition.wait` inside `concurrent.futures.wait`; the pool
threads run Python bytecode (their stacks change, their loop counters advance, the GIL is shared).
Nothing is queued in the pool; every future is RUNNING. Driver in ray.get.
Truth: healthy (no culprit): every shard finishes and the call returns. A hang verdict is wrong.
"""
import os
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import ray


def count_ngrams(shard, n_docs):
    counts = {}
    seed = 1234567 + shard
    for _doc in range(n_docs):
        words = []
        for _ in range(40):
            seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
            words.append(seed % 50)
        for i in range(len(words) - 2):
            key = (words[i], words[i + 1], words[i + 2])
            counts[key] = counts.get(key, 0) + 1
    return shard, len(counts)


@ray.remote(num_cpus=1)
class Scorer:
    def score_all(self, sizes):
        t0 = time.time()
        results = {}
        with ThreadPoolExecutor(max_workers=len(sizes), thread_name_prefix="ngram") as pool:
            pending = {pool.submit(count_ngrams, s, n) for s, n in enumerate(sizes)}
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    shard, k = f.result()
                    results[shard] = k
                    print(f"shard {shard}: {k} distinct trigrams after {time.time() - t0:.0f} s", flush=True)
        return results


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    sc = Scorer.remote()
    ref = sc.score_all.remote([1200000, 1600000, 2000000])
    print("READY: driver -> Scorer.score_all (wait(FIRST_COMPLETED) on 3 busy pool threads)", flush=True)
    print(ray.get(ref))


if __name__ == "__main__":
    main()
