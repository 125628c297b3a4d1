"""Driver feeds a scoring worker through a bounded ray.util.queue and reads results only afterwards.

Scenario: an offline evaluation driver creates two ray.util.queue.Queue(maxsize=8) -- requests
and results -- and a Scorer actor that loops: get a request, score it, put the result. The driver
first enqueues all 64 prompts (`requests.put(p)`, blocking when full), and only then drains the
results. After 8 results the Scorer blocks in results.put (full: nobody reads), stops taking
requests, and the driver blocks in requests.put (full). Both waits are calls into the queues'
async _QueueActor actors, which are idle (their put coroutines are waiting for space).

Mechanism: a deadlock through two bounded ray.util.queue queues (a cycle driver -> requests
queue actor -> Scorer -> results queue actor -> driver), every process waiting on a put.
Truth: culprit the driver (puts everything before reading; a producer that is also the only
consumer of the other queue) -- cycle with the Scorer. Fix: drain results in a thread / alternate
put and get, or unbounded results queue, or put with timeout.
"""
import os

import ray
from ray.util.queue import Queue


@ray.remote(num_cpus=0.1)
class Scorer:
    def __init__(self, requests: Queue, results: Queue):
        self.requests, self.results = requests, results

    def _score(self, prompt: str) -> float:
        return len(set(prompt.split())) / max(1, len(prompt.split()))

    def serve_forever(self) -> int:
        n = 0
        while True:
            item = self.requests.get()
            if item is None:
                return n
            self.results.put((item[0], self._score(item[1])))
            n += 1


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    requests, results = Queue(maxsize=8), Queue(maxsize=8)
    scorer = Scorer.remote(requests, results)
    done = scorer.serve_forever.remote()
    prompts = [(i, f"prompt {i} about the weather in city {i % 7}") for i in range(64)]
    print("READY enqueueing 64 prompts", flush=True)
    for p in prompts:
        requests.put(p)
    requests.put(None)
    scores = [results.get() for _ in prompts]
    print(len(scores), ray.get(done))


if __name__ == "__main__":
    main()
